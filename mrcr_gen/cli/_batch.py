"""`mrcr-eval batch export DATA... -o requests.jsonl`, `mrcr-eval batch import RESULTS.jsonl DATA... --out RUN_DIR`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from pydantic import ValidationError
from rich.console import Console

from ._common import (
    EXIT_FINDINGS,
    TOKENIZER_HELP,
    CommandError,
    checked_tokenizer,
    data_inputs,
    one_line,
    run_app,
    stderr,
)

batch_app = typer.Typer(
    add_completion=False,
    help="Batch files for servers without an online endpoint (`vllm run-batch`): write the requests, then grade "
    "the results into a run folder. For the OpenAI Batch API itself use mrcr-eval --batch.",
)

DATA_HELP = "MRCR data files, directories, globs or hf:// paths (as for mrcr-eval)."


def _config(given: dict[str, Any], out: str) -> Any:
    """The EvalConfig of a command's options (`given`: its locals, those that are config fields)."""
    from ..eval import EvalConfig

    options = {name: value for name, value in given.items() if name in EvalConfig.model_fields}
    if options.get("extra_body") is not None:
        try:
            options["extra_body"] = json.loads(options["extra_body"])
        except ValueError as exc:
            raise CommandError(f"--extra-body: not valid JSON ({exc})") from None
        if not isinstance(options["extra_body"], dict):
            raise CommandError("--extra-body: expected a JSON object")
    options["data"] = [str(p) for p in data_inputs(options["data"], with_csv=True)]
    options["needles"] = options["needles"] or None
    options["bins"] = options["bins"] or None
    options["tokenizer_spec"] = given["tokenizer"]
    if given["tokenizer"] != "o200k_base":
        checked_tokenizer(given["tokenizer"])
    try:
        return EvalConfig(**options | {"out": out})
    except ValidationError as exc:
        raise CommandError(one_line(exc)) from None


def _over_window(config: Any) -> list[Any] | None:
    """The rows over --max-context-window counted with --tokenizer (None: counted as the seed counts)."""
    if config.max_context_window is None or config.counts_as_seed:
        return None
    from .._api import preflight
    from ..eval import EvalError

    try:
        return preflight(config)
    except EvalError as exc:
        raise CommandError(str(exc)) from None


MODEL = typer.Option(..., "--model", "-m", help="The model name the requests carry (vllm run-batch --model M).")
NEEDLES = typer.Option([], "--needles", "-n", help="Only rows with this needle count (repeatable).")
BINS = typer.Option([], "--bin", "-b", help="Only rows of the bin with this upper edge (repeatable).")
LIMIT = typer.Option(None, "--limit", min=0, help="At most this many rows (after the filters).")
TEMPERATURE = typer.Option(None, "--temperature", help="Sampling temperature (default: not sent).")
MAX_OUTPUT = typer.Option(None, "--max-output-tokens", min=1, help="Output token limit (default: not sent).")
TOKENS_FIELD = typer.Option(
    "max_completion_tokens", "--max-tokens-field", help="max_completion_tokens or max_tokens: the field of the limit."
)
EFFORT = typer.Option(None, "--reasoning-effort", help="Sent as reasoning_effort.")
EXTRA_BODY = typer.Option(None, "--extra-body", help="JSON object merged into every request body.")
PER_BIN = typer.Option(None, "--per-bin", min=1, help="At most K rows per (bin, needle count), as mrcr-eval --per-bin.")
PER_BIN_SEED = typer.Option(0, "--per-bin-seed", help="The seed of the --per-bin hash.")
CONTROL = typer.Option(None, "--control", help="query-only: each row's final query alone (NOT a score; as mrcr-eval).")
WINDOW = typer.Option(
    None, "--max-context-window", min=1, help="Leave out rows whose prompt has more tokens (--tokenizer)."
)
TOKENIZER = typer.Option("o200k_base", "--tokenizer", help=TOKENIZER_HELP)


@batch_app.command(
    "export",
    help="Write the rows as a batch input file (OpenAI's format; custom_id = the row digest), one request per "
    "distinct row, with the body mrcr-eval would send. Give `batch import` the same options.",
)
def export(
    data: list[str] = typer.Argument(..., help=DATA_HELP),
    output: Path = typer.Option(..., "-o", "--output", help="The batch input file to write (JSONL)."),
    model: str = MODEL,
    needles: list[int] = NEEDLES,
    bins: list[int] = BINS,
    limit: int | None = LIMIT,
    temperature: float | None = TEMPERATURE,
    max_output_tokens: int | None = MAX_OUTPUT,
    max_tokens_field: str = TOKENS_FIELD,
    reasoning_effort: str | None = EFFORT,
    extra_body: str | None = EXTRA_BODY,
    per_bin: int | None = PER_BIN,
    per_bin_seed: int = PER_BIN_SEED,
    control: str | None = CONTROL,
    max_context_window: int | None = WINDOW,
    tokenizer: str = TOKENIZER,
) -> None:
    from .._api import export_batch
    from ..eval import EvalError

    config = _config(locals(), str(output.parent))
    try:
        stats = export_batch(config, output, too_long=_over_window(config))
    except EvalError as exc:
        raise CommandError(str(exc)) from None
    except OSError as exc:
        raise CommandError(f"cannot write {output}: {exc.strerror or exc}") from None
    stderr.print(
        f"wrote {stats.requests} requests ({stats.bytes:,} bytes) to {output}"
        f"{f'; {stats.duplicates} rows share the content of another' if stats.duplicates else ''}"
        f"{f'; {stats.errors} rows cannot be sent' if stats.errors else ''}",
        highlight=False,
    )
    if stats.unreadable:
        raise CommandError(f"cannot read {', '.join(stats.unreadable)}")


@batch_app.command(
    "import",
    help="Grade a batch output file into RUN_DIR: the same results.jsonl, run.json and summary an online run "
    "makes. A selected row without a line in the file is an error (check not_in_results): exit code 1.",
)
def import_(
    results: Path = typer.Argument(..., help="The batch output file (OpenAI's, or vllm run-batch -o's)."),
    data: list[str] = typer.Argument(..., help=DATA_HELP),
    out: Path = typer.Option(..., "--out", "-o", help="Run directory (as mrcr-eval makes it)."),
    model: str = MODEL,
    needles: list[int] = NEEDLES,
    bins: list[int] = BINS,
    limit: int | None = LIMIT,
    temperature: float | None = TEMPERATURE,
    max_output_tokens: int | None = MAX_OUTPUT,
    max_tokens_field: str = TOKENS_FIELD,
    reasoning_effort: str | None = EFFORT,
    extra_body: str | None = EXTRA_BODY,
    per_bin: int | None = PER_BIN,
    per_bin_seed: int = PER_BIN_SEED,
    control: str | None = CONTROL,
    max_context_window: int | None = WINDOW,
    tokenizer: str = TOKENIZER,
    strip_think: bool = typer.Option(False, "--strip-think", help="Grade without <think> blocks (NOT official)."),
    price_in: float | None = typer.Option(None, "--price-in", min=0, help="USD per 1M prompt tokens."),
    price_out: float | None = typer.Option(None, "--price-out", min=0, help="USD per 1M completion tokens."),
    price_cached: float | None = typer.Option(
        None, "--price-cached", min=0, help="USD per 1M cached prompt tokens (as for mrcr-eval)."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No table."),
) -> None:
    from .._api import import_batch, print_report, write_report
    from ..eval import EvalError

    if not results.is_file():
        raise CommandError(f"{results}: no such file")
    config = _config(locals(), str(out))
    try:
        stats = import_batch(config, results, too_long=_over_window(config))
    except EvalError as exc:
        raise CommandError(str(exc)) from None
    summary = write_report(out)
    for problem in stats.problems:
        stderr.print(f"warning: {problem}", highlight=False, markup=False, soft_wrap=True)
    if not quiet:
        print_report(summary, Console())
        stderr.print(
            f"this import: {stats.scored} scored, {stats.errors} errors, {stats.skipped} skipped, "
            f"{stats.resumed} already done; {stats.unused} of the {stats.results} results graded into no row; "
            f"wrote {out / 'summary.json'}",
            highlight=False,
        )
    if summary["file_errors"]:
        raise CommandError(summary["file_errors"][0]["error"])
    if not summary["complete"]:
        raise CommandError(f"{summary['errors']['count']} rows failed (they count 0 in mean_score)", EXIT_FINDINGS)


def batch_main(args: list[str]) -> None:
    run_app(batch_app, "mrcr-eval batch", args)
