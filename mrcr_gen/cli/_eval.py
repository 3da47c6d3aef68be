"""`mrcr-eval DATA... --model M --out RUN_DIR` and `mrcr-eval report RUN_DIR`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
from pydantic import ValidationError
from rich.console import Console

from .._bins import bin_by_upper
from ..eval._report import print_report, write_report
from ..eval._runner import EvalConfig, EvalError, preflight, run_eval_async
from ._common import TOKENIZER_HELP, CommandError, checked_tokenizer, one_line, parquet_inputs, run_app, stderr

app = typer.Typer(
    add_completion=False,
    help="Score an OpenAI-compatible model on MRCR parquet files. Resumable: rerun the same command "
    "to continue a killed run. The key comes from OPENAI_API_KEY. "
    "See also: mrcr-eval report RUN_DIR.",
)
report_app = typer.Typer(add_completion=False, help="Rewrite RUN_DIR/summary.json and plot.png and print the table.")


@app.command()
def evaluate(
    data: list[str] = typer.Argument(..., help="MRCR parquet files (openai/mrcr schema), directories (every *.parquet below), globs or hf://datasets/ORG/NAME[@REV]/PATH-or-GLOB."),
    model: str = typer.Option(..., "--model", "-m", help="Model name sent to the server."),
    out: Path = typer.Option(..., "--out", "-o", help="Run directory (results.jsonl, summary.json, plot.png)."),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="OpenAI-compatible base URL, e.g. http://localhost:8000/v1 (default: OPENAI_BASE_URL or OpenAI)."),
    concurrency: int = typer.Option(8, "--concurrency", "-c", min=1, help="Requests in flight at most."),
    max_context_window: Optional[int] = typer.Option(None, "--max-context-window", min=1, help="Skip (and count) rows whose prompt has more tokens (counted with --tokenizer, the chat template or the server)."),
    tokenizer: str = typer.Option("o200k_base", "--tokenizer", help=TOKENIZER_HELP + " Counts prompts for --max-context-window."),
    chat_template: bool = typer.Option(False, "--chat-template", help="Count the prompt as the model's chat template (from the hf: tokenizer's tokenizer_config.json) renders it."),
    count_with_server: bool = typer.Option(False, "--count-with-server", help="Count each prompt with the server's vLLM-style /tokenize endpoint."),
    needles: list[int] = typer.Option([], "--needles", "-n", help="Only rows with this needle count (repeatable)."),
    bins: list[int] = typer.Option([], "--bin", "-b", help="Only rows of the bin with this upper edge, e.g. 65536 (repeatable)."),
    limit: Optional[int] = typer.Option(None, "--limit", min=0, help="At most this many rows (after the filters)."),
    temperature: Optional[float] = typer.Option(None, "--temperature", help="Sampling temperature (default: not sent)."),
    max_output_tokens: Optional[int] = typer.Option(None, "--max-output-tokens", min=1, help="Output token limit (default: not sent)."),
    max_tokens_field: str = typer.Option("max_completion_tokens", "--max-tokens-field", help="Request field for --max-output-tokens: max_completion_tokens or max_tokens (older servers)."),
    max_retries: int = typer.Option(8, "--max-retries", min=0, help="Retries per request on 429/5xx/timeouts."),
    timeout: float = typer.Option(600.0, "--timeout", min=0.001, help="Seconds per request attempt."),
    retry_errors: bool = typer.Option(True, "--retry-errors/--no-retry-errors", help="On resume, retry rows that failed before."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress line and no table."),
) -> None:
    for upper in bins:
        try:
            bin_by_upper(upper)
        except ValueError as exc:
            raise CommandError(f"--bin: {exc}") from None
    if tokenizer != "o200k_base" or chat_template:
        checked_tokenizer(tokenizer)
    files = parquet_inputs(data)
    try:
        config = EvalConfig(
            data=[str(p) for p in files],
            model=model,
            out=str(out),
            base_url=base_url,
            concurrency=concurrency,
            max_context_window=max_context_window,
            needles=needles or None,
            bins=bins or None,
            limit=limit,
            temperature=temperature,
            max_output_tokens=max_output_tokens,
            max_tokens_field=max_tokens_field,
            max_retries=max_retries,
            timeout=timeout,
            retry_errors=retry_errors,
            tokenizer=tokenizer,
            chat_template=chat_template,
            count_with_server=count_with_server,
        )
    except ValidationError as exc:
        raise CommandError(one_line(exc)) from None
    too_long = None
    if max_context_window is not None and not config.counts_as_seed:
        try:
            too_long = preflight(config)
        except EvalError as exc:
            raise CommandError(str(exc)) from None
        how = "the server's /tokenize" if count_with_server else f"{tokenizer}{' chat template' if chat_template else ''}"
        if not quiet:
            stderr.print(f"{len(too_long)} row(s) over --max-context-window {max_context_window} ({how}), skipped:", highlight=False)
            for item in too_long:
                stderr.print(f"  {item.file} row {item.row}: {item.prompt_tokens} tokens", highlight=False, soft_wrap=True)

    counts = {"ok": 0, "error": 0, "skipped": 0}

    def on_record(record: dict) -> None:
        counts[record["status"]] = counts.get(record["status"], 0) + 1
        if not quiet and stderr.is_terminal:
            stderr.print(
                f"\r[dim]scored {counts['ok']}  errors {counts['error']}  skipped {counts['skipped']}[/dim]",
                end="",
                highlight=False,
            )

    import asyncio

    try:
        stats = asyncio.run(run_eval_async(config, on_record=on_record, too_long=too_long))
    except EvalError as exc:
        raise CommandError(str(exc)) from None
    if not quiet and stderr.is_terminal:
        stderr.print()
    summary = write_report(out)
    if not quiet:
        print_report(summary, Console())
        stderr.print(
            f"this run: {stats.scored} scored, {stats.errors} errors, {stats.skipped} skipped, "
            f"{stats.resumed} already done; wrote {out / 'summary.json'} and {out / 'plot.png'}",
            highlight=False,
        )


@report_app.command()
def report(run_dir: Path = typer.Argument(..., help="A mrcr-eval run directory.")) -> None:
    if not (run_dir / "results.jsonl").is_file():
        raise CommandError(f"{run_dir} has no results.jsonl: not a mrcr-eval run directory")
    try:
        summary = write_report(run_dir)
    except ValueError as exc:  # run.json that is not JSON
        raise CommandError(str(exc)) from None
    print_report(summary, Console())


def eval_main(args: list[str] | None = None) -> None:
    """`report` as the first argument selects the report command; anything else evaluates."""
    argv = list(sys.argv[1:] if args is None else args)
    if argv and argv[0] == "report":
        run_app(report_app, "mrcr-eval report", argv[1:])
    else:
        run_app(app, "mrcr-eval", argv)
