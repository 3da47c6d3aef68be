"""`mrcr-eval DATA... --model M --out RUN_DIR`, `mrcr-eval report RUN_DIR`, `mrcr-eval compare RUN_DIR...`."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import typer
from pydantic import ValidationError
from rich.console import Console

from ..eval import EvalConfig, EvalError, EvalFatal
from ._common import (
    EXIT_FINDINGS,
    EXIT_PENDING,
    NO_CACHE_HELP,
    TOKENIZER_HELP,
    CommandError,
    checked_tokenizer,
    data_inputs,
    one_line,
    print_warnings,
    run_app,
    stderr,
)

app = typer.Typer(
    add_completion=False,
    help="Score an OpenAI-compatible model on MRCR parquet files. Resumable: rerun the same command "
    "to continue a killed run. The key comes from OPENAI_API_KEY. "
    "Scoring is the official loop's: every HTTP-200 reply is graded (empty or null scores 0), only "
    "transport failures are retried, errors count 0 in mean_score. Exit codes: 0 complete, 1 some rows "
    "failed (rerun to retry them), 2 bad input, changed settings, a run folder another run is writing "
    "or a fatal server answer. The summary and exit code describe the rows this command selects. "
    "See also: mrcr-eval report RUN_DIR, mrcr-eval compare RUN_DIR..., mrcr-eval batch export|import.",
)
report_app = typer.Typer(
    add_completion=False,
    help="Rewrite RUN_DIR/summary.json and its plots and print the table; rows of a run made by an earlier "
    "version get their failure analysis first (the data files are read again). Exit code 3 while Batch API "
    "batches of the run are still running (the numbers leave their rows out).",
)
view_app = typer.Typer(
    add_completion=False,
    help="Write one self-contained HTML report of RUN_DIR (no network needed, works from file:// and as an "
    "e-mail attachment): headline numbers, plots, what the replies returned per bin, and every row with its "
    "query, expected answer and reply side by side.",
)
compare_app = typer.Typer(
    add_completion=False,
    help="Compare runs: one row per run (model, rows, mean, AUC@128k, AUC@1M, per-bin means, errors, cost). A "
    "--control query-only run comes right after its full run (same model and data), with its memorization test: a "
    "one-sided paired t-test of its scores against the random-writing floor (flagged at p < 0.01).",
)


def _json_object(text: str | None, option: str) -> dict | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise CommandError(f"{option}: not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise CommandError(
            f'{option}: expected a JSON object, e.g. \'{{"chat_template_kwargs": {{"enable_thinking": false}}}}\''
        )
    return value


@app.command()
def evaluate(
    data: list[str] = typer.Argument(
        ...,
        help=(
            "MRCR parquet files (openai/mrcr schema), MRCR v2 CSV / parquet files, directories (every *.parquet below, "
            "and every MRCR v2 *.csv: a header with 'queries' and 'answer'), globs or "
            "hf://datasets/ORG/NAME[@REV]/PATH-or-GLOB."
        ),
    ),
    model: str = typer.Option(..., "--model", "-m", help="Model name sent to the server."),
    out: Path = typer.Option(..., "--out", "-o", help="Run directory (results.jsonl, summary.json, plot.png)."),
    base_url: str | None = typer.Option(
        None,
        "--base-url",
        help="OpenAI-compatible base URL, e.g. http://localhost:8000/v1 (default: OPENAI_BASE_URL or OpenAI).",
    ),
    batch: bool = typer.Option(
        False,
        "--batch",
        help="Send the rows through the OpenAI Batch API (24h window, half the price), wait for the batches and "
        "grade them; a rerun collects batches already made instead of sending again.",
    ),
    poll_interval: float = typer.Option(
        10.0, "--poll-interval", min=0.001, help="With --batch: seconds to the first status check (doubling to 10 min)."
    ),
    wait: bool = typer.Option(
        True, "--wait/--no-wait", help="With --batch: wait for the batches to end, or submit, collect what ended, exit."
    ),
    keep_batch_files: bool = typer.Option(
        False,
        "--keep-batch-files",
        help="With --batch: keep the batches' input, output and error files in the account (default: deleted once "
        "downloaded into RUN_DIR/batches/).",
    ),
    concurrency: int = typer.Option(8, "--concurrency", "-c", min=1, help="Requests in flight at most."),
    max_context_window: int | None = typer.Option(
        None,
        "--max-context-window",
        min=1,
        help=(
            "Skip (and count) rows whose prompt has more tokens (counted with --tokenizer, the chat template or the "
            "server)."
        ),
    ),
    tokenizer: str = typer.Option(
        "o200k_base", "--tokenizer", help=TOKENIZER_HELP + " Counts prompts for --max-context-window and bins the rows."
    ),
    chat_template: bool = typer.Option(
        False,
        "--chat-template",
        help=(
            "Count the prompt as the model's chat template (from the hf: tokenizer's tokenizer_config.json) renders it."
        ),
    ),
    count_with_server: bool = typer.Option(
        False, "--count-with-server", help="Count each prompt with the server's vLLM-style /tokenize endpoint."
    ),
    no_cache: bool = typer.Option(False, "--no-cache", help=NO_CACHE_HELP),
    needles: list[int] = typer.Option([], "--needles", "-n", help="Only rows with this needle count (repeatable)."),
    bins: list[int] = typer.Option(
        [], "--bin", "-b", help="Only rows of the bin with this upper edge, e.g. 65536 (repeatable)."
    ),
    limit: int | None = typer.Option(None, "--limit", min=0, help="At most this many rows (after the filters)."),
    temperature: float | None = typer.Option(None, "--temperature", help="Sampling temperature (default: not sent)."),
    max_output_tokens: int | None = typer.Option(
        None, "--max-output-tokens", min=1, help="Output token limit (default: not sent)."
    ),
    max_tokens_field: str = typer.Option(
        "max_completion_tokens",
        "--max-tokens-field",
        help="Request field for --max-output-tokens: max_completion_tokens or max_tokens (older servers).",
    ),
    reasoning_effort: str | None = typer.Option(
        None, "--reasoning-effort", help="Sent as reasoning_effort (e.g. low, medium, high) for reasoning models."
    ),
    extra_body: str | None = typer.Option(
        None,
        "--extra-body",
        help=(
            'JSON object merged into every request, e.g. \'{"chat_template_kwargs": {"enable_thinking": false}}\' for '
            "vLLM."
        ),
    ),
    strip_think: bool = typer.Option(
        False,
        "--strip-think",
        help="Grade replies with <think>...</think> removed. NOT the official score: summary.json says so.",
    ),
    max_retries: int = typer.Option(
        8,
        "--max-retries",
        min=0,
        help=(
            "Retries per request on transport failures (429, 5xx, timeouts, connection errors, bodies that are not a "
            "chat completion)."
        ),
    ),
    timeout: float = typer.Option(600.0, "--timeout", min=0.001, help="Seconds per request attempt."),
    retry_errors: bool = typer.Option(
        True, "--retry-errors/--no-retry-errors", help="On resume, retry rows that failed before."
    ),
    price_in: float | None = typer.Option(
        None,
        "--price-in",
        min=0,
        help=(
            "USD per 1M prompt tokens, for the cost (default: the list price of the model's exact name). "
            "Kept in run.json: a resume without the price flags keeps them."
        ),
    ),
    price_out: float | None = typer.Option(
        None,
        "--price-out",
        min=0,
        help="USD per 1M completion tokens, for the cost. One flag alone needs the model's list price.",
    ),
    price_cached: float | None = typer.Option(
        None,
        "--price-cached",
        min=0,
        help=(
            "USD per 1M cached prompt tokens (default: the model's published cached-input price, else --price-in). "
            "For a model without a list price it needs --price-in and --price-out."
        ),
    ),
    control: str | None = typer.Option(
        None,
        "--control",
        help=(
            "query-only: send each row's final query (after the few-shot preamble) without the conversation, to "
            "test for memorization (NOT a score; compare it with the full run: mrcr-eval compare FULL CONTROL)."
        ),
    ),
    per_bin: int | None = typer.Option(
        None,
        "--per-bin",
        min=1,
        help=(
            "At most K rows per (bin, needle count): those whose seeded hash of the row digest is smallest, so "
            "K=10 is a subset of K=50 on any machine."
        ),
    ),
    per_bin_seed: int = typer.Option(0, "--per-bin-seed", help="The seed of the --per-bin hash."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress line and no table."),
) -> None:
    _check_bins(bins)
    if tokenizer != "o200k_base" or chat_template:
        checked_tokenizer(tokenizer)
    files = data_inputs(data, with_csv=True)
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
            max_tokens_field=cast(Any, max_tokens_field),  # a str here; EvalConfig checks it is a known field
            reasoning_effort=reasoning_effort,
            extra_body=_json_object(extra_body, "--extra-body"),
            strip_think=strip_think,
            max_retries=max_retries,
            timeout=timeout,
            retry_errors=retry_errors,
            price_in=price_in,
            price_out=price_out,
            price_cached=price_cached,
            control=cast(Any, control),  # a str here; EvalConfig checks it is a known control
            per_bin=per_bin,
            per_bin_seed=per_bin_seed,
            tokenizer_spec=tokenizer,
            chat_template=chat_template,
            count_with_server=count_with_server,
            count_cache=not no_cache,
        )
    except ValidationError as exc:
        raise CommandError(one_line(exc)) from None
    too_long = _preflight(config, quiet) if max_context_window is not None and not config.counts_as_seed else None
    if keep_batch_files and not batch:
        raise CommandError("--keep-batch-files needs --batch")
    stats = _run(
        config, too_long, batch=batch, poll_interval=poll_interval, wait=wait, quiet=quiet, keep=keep_batch_files
    )
    _finish(out, stats, quiet)


def _check_bins(bins: list[int]) -> None:
    if not bins:
        return  # (the recipes' bins are not loaded for nothing: MRCR v2's come with its generator)
    from ..recipes import RECIPES

    edges = sorted({upper for recipe in RECIPES for upper in recipe.bin_uppers()})
    for upper in bins:  # any recipe's bin: MRCR v2's buckets reach 8388608, openai/mrcr's 1048576
        if upper not in edges:
            raise CommandError(f"--bin: no bin has upper edge {upper}; choose one of {', '.join(map(str, edges))}")


def _preflight(config: EvalConfig, quiet: bool) -> list[Any]:
    """The rows over --max-context-window as the run counts them (not as the seed), said on stderr."""
    from .._api import preflight

    try:
        too_long = preflight(config)
    except EvalError as exc:
        raise CommandError(str(exc)) from None
    template = " chat template" if config.chat_template else ""
    how = "the server's /tokenize" if config.count_with_server else f"{config.tokenizer_spec}{template}"
    if not quiet:
        stderr.print(
            f"{len(too_long)} row(s) over --max-context-window {config.max_context_window} ({how}), skipped:",
            highlight=False,
        )
        for item in too_long:
            stderr.print(f"  {item.file} row {item.row}: {item.prompt_tokens} tokens", highlight=False, soft_wrap=True)
    return too_long


def _progress(quiet: bool) -> Callable[[dict], None]:
    """What each record written does: count it, and on a terminal show the counts."""
    counts = {"ok": 0, "error": 0, "skipped": 0}

    def on_record(record: dict) -> None:
        counts[record["status"]] = counts.get(record["status"], 0) + 1
        if not quiet and stderr.is_terminal:
            stderr.print(
                f"\r[dim]scored {counts['ok']}  errors {counts['error']}  skipped {counts['skipped']}[/dim]",
                end="",
                highlight=False,
            )

    return on_record


def _run(
    config: EvalConfig,
    too_long: list[Any] | None,
    *,
    batch: bool,
    poll_interval: float,
    wait: bool,
    quiet: bool,
    keep: bool = False,
) -> Any:
    """Run the evaluation (online or through the Batch API); its counts. A refusal still writes the
    report of what was recorded before it."""
    import asyncio

    from .._api import run_eval_async, write_report
    from ..eval._pipeline import frozen_heap

    on_record = _progress(quiet)
    try:
        with frozen_heap():
            if batch:
                return asyncio.run(_run_batch(config, on_record, too_long, poll_interval, wait, quiet, keep))
            return asyncio.run(run_eval_async(config, on_record=on_record, too_long=too_long))
    except EvalFatal as exc:
        if not quiet and stderr.is_terminal:
            stderr.print()
        write_report(config.out)  # what was recorded before the stop stays visible
        raise CommandError(str(exc)) from None
    except EvalError as exc:
        raise CommandError(str(exc)) from None


def _finish(out: Path, stats: Any, quiet: bool) -> None:
    """Write and show the report; exit 2 for unreadable files, 1 while batches run or rows failed."""
    from .._api import print_report, write_report

    if not quiet and stderr.is_terminal:
        stderr.print()
    summary = write_report(out)
    for problem in getattr(stats, "problems", []):
        stderr.print(f"warning: {problem}", highlight=False, markup=False, soft_wrap=True)
    if not quiet:
        print_report(summary, Console())
        stderr.print(
            f"this run: {stats.scored} scored, {stats.errors} errors, {stats.skipped} skipped, "
            f"{stats.resumed} already done; wrote {out / 'summary.json'} and {out / 'plot.png'}",
            highlight=False,
        )
    if summary["file_errors"]:
        first = summary["file_errors"][0]["error"]
        more = len(summary["file_errors"]) - 1
        raise CommandError(f"{first}{f' (and {more} more unreadable files)' if more else ''}")
    if getattr(stats, "batches_pending", 0):
        raise CommandError(
            f"{stats.requests_waiting} requests are in {stats.batches_pending} batches still running; "
            "rerun the command to collect them",
            EXIT_FINDINGS,
        )
    if not summary["complete"]:
        raise CommandError(
            f"{summary['errors']['count']} rows failed (they count 0 in mean_score; rerun the command to retry them)",
            EXIT_FINDINGS,
        )


async def _run_batch(
    config: EvalConfig, on_record: Any, too_long: Any, poll_interval: float, wait: bool, quiet: bool, keep: bool
) -> Any:
    from .._api import run_batch_async
    from ..eval import BatchLimits

    def on_status(line: str) -> None:
        if not quiet:
            stderr.print(line, highlight=False)

    limits = BatchLimits(poll_first_s=poll_interval)
    return await run_batch_async(
        config, on_record=on_record, on_status=on_status, too_long=too_long, limits=limits, wait=wait, keep_files=keep
    )


def _require_run_dir(run_dir: Path) -> None:
    if not (run_dir / "results.jsonl").is_file() and not _inspect_log(run_dir):
        raise CommandError(f"{run_dir} has no results.jsonl: not a mrcr-eval run directory (nor an Inspect log)")


def _inspect_logs_in(folder: Path) -> list[Path]:
    """The Inspect logs in a folder that is not a run directory (an `inspect eval --log-dir`)."""
    if not folder.is_dir() or (folder / "results.jsonl").is_file():
        return []
    from ..inspect._import import inspect_logs_in

    return inspect_logs_in(folder)


def _report_inspect_logs(folder: Path, logs: list[Path]) -> None:
    """The report of each log of these tasks in `folder`; a log of another task is named and passed over."""
    console, reported = Console(), 0
    for path in logs:
        try:
            _report_inspect_log(path, console, title=str(path))
            reported += 1
        except CommandError as exc:
            print(f"skipped {exc}", file=sys.stderr)  # one line, never wrapped: scripts read it
    if not reported:
        raise CommandError(f"{folder}: no Inspect log of {' or '.join(_tasks())} in it")


def _tasks() -> tuple[str, ...]:
    from ..inspect._import import TASKS

    return TASKS


def _report_inspect_log(path: Path, console: Console, title: str | None = None) -> None:
    """Print the report of one Inspect log, under a rule naming `title` if given (nothing is
    written beside someone's Inspect logs)."""
    from .._api import print_report
    from ..inspect._import import InspectLogError, summarize_inspect_log

    try:
        summary = summarize_inspect_log(path)
    except InspectLogError as exc:
        raise CommandError(str(exc)) from None
    if title is not None:
        console.rule(title)
    print_report(summary, console)
    if summary.get("epochs_note"):
        console.print(summary["epochs_note"], highlight=False)


def _inspect_log(path: Path) -> bool:
    from ..inspect._import import is_inspect_log

    return is_inspect_log(path)


def _inspect_logs_read(paths: list[Path]) -> list[dict]:
    """Inspect logs of the mrcr_gen tasks read as runs: their `compare` entries (run dirs too)."""
    from ..inspect._import import InspectLogError, compare_paths

    try:
        return compare_paths(paths)
    except InspectLogError as exc:
        raise CommandError(str(exc)) from None


def _view_of(path: Path) -> Any:
    """The HTML report of a run directory or an Inspect log."""
    from ..inspect._import import view_path

    return view_path(path)


@report_app.command()
def report(
    run_dir: Path = typer.Argument(
        ..., help="A mrcr-eval run directory, an Inspect log (.eval), or a folder of Inspect logs."
    ),
) -> None:
    from .._api import add_analyses, print_report, write_report
    from .._files import Busy

    logs = _inspect_logs_in(run_dir)
    if logs:  # a folder of Inspect logs: each of these tasks' logs reported, in name order
        _report_inspect_logs(run_dir, logs)
        return
    _require_run_dir(run_dir)
    if _inspect_log(run_dir):
        _report_inspect_log(run_dir, Console())
        return
    try:
        add_analyses(run_dir)
        summary = write_report(run_dir)
    except Busy as exc:
        raise CommandError(str(exc)) from None
    except ValueError as exc:  # run.json that is not JSON
        raise CommandError(str(exc)) from None
    print_report(summary, Console())
    pending = summary.get("pending")
    if pending:
        raise CommandError(
            f"{pending['rows']} rows are in {pending['batches']} Batch API batches still running: these numbers "
            "leave them out; rerun the mrcr-eval command to collect them",
            EXIT_PENDING,
        )


@view_app.command()
def view(
    run_dir: Path = typer.Argument(..., help="A mrcr-eval run directory, or an Inspect log (.eval)."),
    output: Path | None = typer.Option(
        None, "-o", "--output", help="The HTML file (default: RUN_DIR/report.html; LOG.html beside an Inspect log)."
    ),
) -> None:
    from ..eval import render_view, write_html

    _require_run_dir(run_dir)
    if output is None:
        output = run_dir.with_suffix(".html") if _inspect_log(run_dir) else run_dir / "report.html"
    try:
        report = _view_of(run_dir)
        print_warnings(report.warnings)
        write_html(render_view(report), output)
    except ValueError as exc:  # run.json that is not JSON; a log not of these tasks
        raise CommandError(str(exc)) from None
    except OSError as exc:
        raise CommandError(f"cannot write {output}: {exc.strerror or exc}") from None
    print(output)


@compare_app.command()
def compare(
    run_dirs: list[Path] = typer.Argument(..., help="mrcr-eval run directories or Inspect logs (.eval)."),
    as_json: bool = typer.Option(False, "--json", help="Print the comparison as JSON (a list, one object per run)."),
    plot: Path | None = typer.Option(
        None, "--plot", help="Write an overlay plot (PNG): mean score by bin, one line per run."
    ),
    html: Path | None = typer.Option(
        None, "--html", help="Write the runs side by side as one self-contained HTML page."
    ),
) -> None:
    from .._api import compare_runs
    from ..eval import render_compare, write_html
    from ..eval._compare import compare_table, controls_table, overlay_png, plot_compare
    from ..eval._floors import declared_floors
    from ..recipes import RECIPES

    for run_dir in run_dirs:
        _require_run_dir(run_dir)
    try:
        entries = _inspect_logs_read(run_dirs) if any(map(_inspect_log, run_dirs)) else compare_runs(run_dirs)
    except ValueError as exc:  # run.json that is not JSON
        raise CommandError(str(exc)) from None
    if plot is not None:
        try:
            plot_compare(entries, plot)
        except OSError as exc:
            raise CommandError(f"cannot write {plot}: {exc.strerror or exc}") from None
    if html is not None:
        try:
            reports = [_view_of(run_dir) for run_dir in run_dirs]
            named = zip(run_dirs, reports, strict=True)
            print_warnings([f"{run_dir}: {w}" for run_dir, report in named for w in report.warnings])
            write_html(render_compare(reports, entries, overlay_png(entries), RECIPES), html)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        except OSError as exc:
            raise CommandError(f"cannot write {html}: {exc.strerror or exc}") from None
    if as_json:
        print(json.dumps(entries, indent=2))
    else:
        # A leaderboard is wide: do not squeeze it into 80 columns when written to a file or pipe.
        console = Console(width=None if sys.stdout.isatty() else 240)
        console.print(compare_table(entries))
        controls = controls_table(entries, declared_floors(RECIPES))
        if controls is not None:
            console.print(controls)


SUBCOMMANDS = {"report": report_app, "compare": compare_app, "view": view_app}


def eval_main(args: list[str] | None = None) -> None:
    """`report`, `compare` or `view` as the first argument selects that command; anything else evaluates."""
    argv = list(sys.argv[1:] if args is None else args)
    if argv and argv[0] in SUBCOMMANDS:
        run_app(SUBCOMMANDS[argv[0]], f"mrcr-eval {argv[0]}", argv[1:])
    else:
        run_app(app, "mrcr-eval", argv)
