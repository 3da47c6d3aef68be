"""`mrcr-gen pool ...`: build pools of real writings (harvest MRCR files, or ask an LLM)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.progress import MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ._common import (
    EXIT_FINDINGS,
    TOKENIZER_HELP,
    CommandError,
    checked_tokenizer,
    data_inputs,
    stderr,
)

MAX_TOKENS_FIELDS = ("max_tokens", "max_completion_tokens")

# Options `pool build` and `pool export-requests` share: which writings a pool plans, and how each is asked for.
PER_PAIR = typer.Option(1, "--per-pair", "-k", min=1, help="Writings per (format, entity) ask.")
NEEDLE_ASKS = typer.Option(
    32, "--needle-asks", min=0, help="Asks that get --needle-variants writings, so they can be needles."
)
NEEDLE_VARIANTS = typer.Option(
    8, "--needle-variants", min=1, help="Writings for each needle ask (the largest needle count you need)."
)
ENTITIES = typer.Option(None, "--entities", min=1, help="Use a seeded sample of N catalog entities (default: all).")
FORMATS = typer.Option(
    [], "--formats", "--format", help="Formats to use (repeatable or comma-separated; default: all)."
)
SEED = typer.Option(0, "--seed", help="Seed of the entity sample and of which asks become needle asks.")
TEMPERATURE = typer.Option(None, "--temperature", help="Sampling temperature (default: the server's).")
MAX_TOKENS = typer.Option(None, "--max-tokens", min=1, help="max_tokens per writing (default: the server's).")
MAX_TOKENS_FIELD = typer.Option(
    "max_tokens",
    "--max-tokens-field",
    help="Request field for --max-tokens: max_tokens (default, what older caches were keyed with) "
    "or max_completion_tokens (OpenAI reasoning models).",
)
CACHE_DIR = typer.Option(None, "--cache-dir", help="Writing cache (default: $MRCR_GEN_CACHE or ~/.cache/mrcr-gen).")
PRICE_IN = typer.Option(None, "--price-in", help="USD per 1M prompt tokens, for the cost estimate.")
PRICE_OUT = typer.Option(None, "--price-out", help="USD per 1M completion tokens, for the cost estimate.")
COMPARE = typer.Option(
    None, "--compare", help="Quality report: a pool whose writings are the reference (default: the catalog's)."
)

pool_app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Build pools of real writings: harvest them from MRCR files, or have an LLM write them.",
)


@pool_app.command("harvest")
def harvest_command(
    inputs: list[str] = typer.Argument(
        ...,
        help="MRCR files: openai/mrcr parquet (generated or the official ones) or MRCR v2 CSV or parquet; "
        "directories or globs.",
    ),
    out: Path = typer.Option(..., "--out", "-o", help="Pool parquet file to write (the catalog goes beside it)."),
    tokenizer: str = typer.Option("o200k_base", "--tokenizer", help=TOKENIZER_HELP + " Counts every writing."),
) -> None:
    """Extract every distinct (ask, writing) pair of MRCR files into a pool, and the catalog found.

    Each file is read by the recipe that claims it: openai/mrcr asks as they are, MRCR v2 asks kept
    as `write a {format} about {topic} in {style} style` (see docs/pools.md). A file that is neither,
    or a pool that would be empty, is refused in one line (exit 2) and nothing is written; a file
    with no rows among others that hold writings is harvested as nothing, with a warning."""
    from .._api import harvest
    from ..pool import PoolError

    checked_tokenizer(tokenizer)
    files = data_inputs(inputs, with_csv=True)
    try:
        columns = (TextColumn("[bold]harvesting"), MofNCompleteColumn(), TextColumn("rows"), TimeElapsedColumn())
        with Progress(*columns, console=stderr) as bar:
            task = bar.add_task("rows", total=None)
            try:
                report = harvest(files, out, on_row=lambda: bar.advance(task), tokenizer=tokenizer)
            except BaseException:
                # A refusal is its one line: the bar goes (erased on a terminal, never printed to a
                # file), and leaving the block prints nothing more.
                bar.live.transient = True
                bar.live.stop()
                bar.disable = True
                raise
    except PoolError as exc:
        raise CommandError(str(exc)) from None
    except OSError as exc:  # writing --out failed (its folder is a file, no permission, ...)
        raise CommandError(f"cannot write {exc.filename or out}: {exc.strerror or exc}") from None
    print_quality(out)  # the warning below stays the last line
    if report.empty_files:
        print(f"mrcr-gen: warning: no rows (nothing harvested) in {', '.join(report.empty_files)}", file=sys.stderr)
    print(
        f"pool {report.out}: {report.writings:,} distinct writings ({report.asks:,} asks, {report.formats} formats, "
        f"{report.entities} entities, {report.tokens:,} {report.tokenizer} tokens) from {report.pairs:,} pairs in "
        f"{report.rows:,} rows of {len(report.files)} file(s); {report.duplicates:,} duplicates dropped"
        + (f", {report.unparsed:,} unparsable pairs skipped" if report.unparsed else "")
    )
    print(f"catalog {report.catalog}")


def print_quality(pool: Path) -> None:
    """The quality report written beside `pool`, as a table on stderr."""
    from ..pool._quality import QualityReport, quality_lines, quality_report_path

    report = QualityReport.model_validate_json(quality_report_path(pool).read_text(encoding="utf-8"))
    for line in quality_lines(report):
        print(line, file=sys.stderr)


@pool_app.command("quality")
def quality_command(
    pool: Path = typer.Argument(..., help="Pool parquet file (its report goes beside it)."),
    compare: Path | None = typer.Option(
        None, "--compare", help="A pool whose writings are the reference (e.g. harvested from the official files)."
    ),
) -> None:
    """Write a pool's quality report (`<pool>.quality.json`) and print it: writing tokens per format
    beside the reference, duplicates, and empty, refusing or off-ask replies (kept out of needle slots)."""
    from .._api import pool_quality
    from ..pool import PoolError

    try:
        pool_quality(pool, compare)
    except PoolError as exc:
        raise CommandError(str(exc)) from None
    except OSError as exc:
        raise CommandError(f"cannot write the report of {pool}: {exc.strerror or exc}") from None
    print_quality(pool)


@pool_app.command("build")
def build_command(
    writer: str = typer.Option("openai", "--writer", help="Who writes: openai (any OpenAI-compatible endpoint)."),
    model: str = typer.Option(..., "--model", "-m", help="Model name, e.g. gpt-4o or the name vLLM serves."),
    out: Path = typer.Option(..., "--out", "-o", help="Pool parquet file to write."),
    base_url: str | None = typer.Option(
        None, "--base-url", help="API base URL (default: $OPENAI_BASE_URL, else OpenAI)."
    ),
    per_pair: int = PER_PAIR,
    needle_asks: int = NEEDLE_ASKS,
    needle_variants: int = NEEDLE_VARIANTS,
    concurrency: int | None = typer.Option(
        None, "--concurrency", "-c", min=1, help="Requests in flight at most (default 16; not with --batch)."
    ),
    entities: int | None = ENTITIES,
    formats: list[str] = FORMATS,
    seed: int = SEED,
    temperature: float | None = TEMPERATURE,
    max_tokens: int | None = MAX_TOKENS,
    max_tokens_field: str = MAX_TOKENS_FIELD,
    cache_dir: Path | None = CACHE_DIR,
    price_in: float | None = PRICE_IN,
    price_out: float | None = PRICE_OUT,
    timeout: float = typer.Option(
        600.0, "--timeout", min=0.1, help="Seconds before one request times out (then it is retried)."
    ),
    compare: Path | None = COMPARE,
    batch: bool = typer.Option(
        False, "--batch", help="Send the writings the cache lacks through the OpenAI Batch API (half the price)."
    ),
    wait: bool | None = typer.Option(  # None: not given (refused without --batch when given)
        None, "--wait/--no-wait", help="With --batch: wait for the batches to end (default), or submit, collect, exit."
    ),
    poll_interval: float | None = typer.Option(
        None,
        "--poll-interval",
        min=0.001,
        help="With --batch: seconds to the first status check (default 10, doubling to 10 min).",
    ),
) -> None:
    """Have an LLM write a pool: each writing answers exactly `write a {format} about {entity}`.

    With --batch, the writings the cache lacks go through the OpenAI Batch API; rerun the same
    command to collect them (and to resend what failed or expired): the pool is written once no
    batch is running."""
    if writer != "openai":
        raise CommandError(f"unknown pool writer {writer!r}; choose openai")
    if batch and concurrency is not None:
        raise CommandError("--concurrency has no meaning with --batch (the Batch API runs the requests)")
    if not batch and (wait is not None or poll_interval is not None):
        raise CommandError("--wait/--no-wait and --poll-interval go with --batch")
    from ..pool._pool import PoolError, read_pool

    plan = checked_plan(formats, entities, seed, per_pair, needle_asks, needle_variants, max_tokens_field)
    try:
        if compare is not None:  # a bad reference is refused before anything is asked for
            read_pool(compare)
    except PoolError as exc:
        raise CommandError(str(exc)) from None
    if batch:
        run_batch_build(
            model=model,
            plan=plan,
            base_url=base_url,
            out=out,
            cache_dir=cache_dir,
            params=(temperature, max_tokens, max_tokens_field),
            price=(price_in, price_out),
            timeout=timeout,
            compare=compare,
            wait=wait is not False,
            poll_interval=10.0 if poll_interval is None else poll_interval,
        )
        return
    report = run_build(
        model=model,
        plan=plan,
        concurrency=concurrency or 16,
        base_url=base_url,
        out=out,
        cache_dir=cache_dir,
        temperature=temperature,
        max_tokens=max_tokens,
        max_tokens_field=max_tokens_field,
        price_in=price_in,
        price_out=price_out,
        timeout=timeout,
        compare=compare,
    )
    if report.failed:
        raise CommandError(f"{len(report.failed)} writings failed (see above); the pool has the others", EXIT_FINDINGS)


def checked_plan(formats, entities, seed, per_pair, needle_asks, needle_variants, max_tokens_field):
    """The asks a pool plans (ask -> writings), or a CommandError for options that name none."""
    from ..pool._pool import PoolError
    from ..recipes.openai_mrcr import plan_asks

    if max_tokens_field not in MAX_TOKENS_FIELDS:
        raise CommandError(f"--max-tokens-field: choose {' or '.join(MAX_TOKENS_FIELDS)}, got {max_tokens_field!r}")
    names = [name.strip() for value in formats for name in value.split(",") if name.strip()]
    try:
        return plan_asks(
            formats=names or None,
            entities=entities,
            seed=seed,
            per_pair=per_pair,
            needle_asks=needle_asks,
            needle_variants=needle_variants,
        )
    except PoolError as exc:
        raise CommandError(str(exc)) from None


def run_build(
    *,
    model,
    plan,
    concurrency,
    base_url,
    out,
    cache_dir,
    temperature,
    max_tokens,
    price_in,
    price_out,
    timeout=600.0,
    max_tokens_field="max_tokens",
    compare=None,
):
    """Build (or complete from the cache) a pool, print its summary to stderr, return the report."""
    from .._prices import PriceError
    from ..pool._pool import PoolError
    from ..recipes.openai_mrcr import BuildError, build_pool_openai, price_for, print_build_report, writing_params

    try:
        report = build_pool_openai(
            model,
            plan,
            concurrency=concurrency,
            base_url=base_url,
            out=out,
            cache_dir=cache_dir,
            params=writing_params(temperature, max_tokens, None, max_tokens_field),
            price=price_for(model, price_in, price_out),
            timeout=timeout,
            console=stderr,
            compare=compare,
        )
    except (BuildError, PoolError, PriceError) as exc:
        raise CommandError(str(exc)) from None
    except OSError as exc:  # the cache or --out cannot be written
        raise CommandError(f"cannot write {exc.filename or out}: {exc.strerror or exc}") from None
    print_build_report(report, stderr)
    print_quality(out)
    return report


def run_batch_build(*, model, plan, base_url, out, cache_dir, params, price, timeout, compare, wait, poll_interval):
    """`pool build --batch`: submit, collect, print; exit 1 while batches run or writings failed."""
    from .._prices import PriceError
    from ..batch import BatchLimits
    from ..pool._batchbuild import elsewhere_note
    from ..pool._pool import PoolError
    from ..recipes.openai_mrcr import BuildError, build_pool_batch, print_build_report, writing_params

    def status(line: str) -> None:
        print(line, file=sys.stderr)

    try:
        progress, report = build_pool_batch(
            model,
            plan,
            out=out,
            cache_dir=cache_dir,
            params=writing_params(params[0], params[1], None, params[2]),
            base_url=base_url,
            price_in=price[0],
            price_out=price[1],
            wait=wait,
            limits=BatchLimits(poll_first_s=poll_interval),
            timeout=timeout,
            compare=compare,
            on_status=status,
        )
    except (BuildError, PoolError, PriceError) as exc:
        raise CommandError(str(exc)) from None
    except OSError as exc:
        raise CommandError(f"cannot write {exc.filename or out}: {exc.strerror or exc}") from None
    for line in progress.problems:
        print(f"mrcr-gen: warning: {line}", file=sys.stderr)
    if report is None:
        raise CommandError(
            f"{progress.waiting:,} requests are in batches still running ({progress.sent:,} sent now, "
            f"{progress.stored:,} writings stored now{elsewhere_note(progress)}); run the same command later "
            "to collect them",
            EXIT_FINDINGS,
        )
    print_build_report(report, stderr)
    print_quality(out)
    if report.failed:
        raise CommandError(
            f"the pool is incomplete: {len(report.failed)} of {report.requested:,} writings failed (see above); "
            "rerun the same command to send them again (it exits with 0 once every writing is there)",
            EXIT_FINDINGS,
        )


@pool_app.command("export-requests")
def export_requests_command(
    model: str = typer.Option(..., "--model", "-m", help="Model name the batch runner serves (the body's model)."),
    out: Path = typer.Option(..., "--out", "-o", help="Batch input file to write (.jsonl; its manifest goes beside)."),
    endpoint: str = typer.Option(
        "run-batch", "--endpoint", help="Name of what runs the requests; it keys the writings in the cache."
    ),
    per_pair: int = PER_PAIR,
    needle_asks: int = NEEDLE_ASKS,
    needle_variants: int = NEEDLE_VARIANTS,
    entities: int | None = ENTITIES,
    formats: list[str] = FORMATS,
    seed: int = SEED,
    temperature: float | None = TEMPERATURE,
    max_tokens: int | None = MAX_TOKENS,
    max_tokens_field: str = MAX_TOKENS_FIELD,
    cache_dir: Path | None = CACHE_DIR,
) -> None:
    """Write the writings a pool plans and the cache lacks as an OpenAI batch input file (what `vllm
    run-batch` and the Batch API read), one chat-completions request per line."""
    from ..pool import PoolError, default_cache_dir
    from ..pool._batchfiles import export_requests, manifest_path
    from ..recipes.openai_mrcr import writing_params

    plan = checked_plan(formats, entities, seed, per_pair, needle_asks, needle_variants, max_tokens_field)
    try:
        manifest = export_requests(
            plan,
            model=model,
            out=out,
            cache_dir=cache_dir or default_cache_dir(),
            endpoint=endpoint,
            params=writing_params(temperature, max_tokens, None, max_tokens_field),
        )
    except PoolError as exc:
        raise CommandError(str(exc)) from None
    except OSError as exc:
        raise CommandError(f"cannot write {exc.filename or out}: {exc.strerror or exc}") from None
    print(
        f"{out}: {len(manifest.requests):,} requests for {model} ({endpoint}); {manifest.cached:,} of the "
        f"{len(manifest.planned):,} planned writings are in the cache already"
        + (f", {manifest.in_batches:,} in batches not collected yet" if manifest.in_batches else "")
        + f"; manifest {manifest_path(out)}"
    )


@pool_app.command("import-results")
def import_results_command(
    results: Path = typer.Argument(..., help="Batch output file (`vllm run-batch -o`, or the Batch API's)."),
    requests: Path = typer.Option(..., "--requests", help="The requests file it answers (from export-requests)."),
    out: Path = typer.Option(..., "--out", "-o", help="Pool parquet file to write."),
    cache_dir: Path | None = CACHE_DIR,
    price_in: float | None = PRICE_IN,
    price_out: float | None = PRICE_OUT,
    compare: Path | None = COMPARE,
) -> None:
    """Store a batch output file's replies in the writings cache and write the pool of the request
    set's writings; missing, failed, duplicated and conflicting lines are reported (exit 1)."""
    from .._prices import PriceError
    from ..pool import PoolError
    from ..pool._batchfiles import read_manifest
    from ..recipes.openai_mrcr import BuildError, import_results, results_price

    try:
        price = results_price(read_manifest(requests).model, price_in, price_out)
        report = import_results(results, requests, out, cache_dir=cache_dir, price=price, compare=compare)
    except (BuildError, PoolError, PriceError) as exc:
        raise CommandError(str(exc)) from None
    except OSError as exc:
        raise CommandError(f"cannot write {exc.filename or out}: {exc.strerror or exc}") from None
    for line in report.summary_lines():
        print(line, file=sys.stderr)
    print_quality(out)
    if report.conflicting or report.failed or report.missing:
        problems = len(report.conflicting) + len(report.failed) + len(report.missing)
        raise CommandError(f"{problems} writings are not in the pool (see above); it has the others", EXIT_FINDINGS)
