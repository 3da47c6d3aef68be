"""`mrcr-gen`: generate MRCR datasets."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from .._bins import BINS
from .._budget import AssemblyError
from .._schemas import export_schemas, stale_schemas
from ..recipes import RECIPES
from ..recipes.openai_mrcr._config import DEFAULT_DATE_ADDED, GenerateConfig
from ..recipes.openai_mrcr._dataset_card import summarize
from ..recipes.openai_mrcr._generate import FileFailed, generate_dataset, worker_preload
from ..recipes.openai_mrcr._offline import OfflineWriter
from ._common import (
    EXIT_FINDINGS,
    TOKENIZER_HELP,
    CommandError,
    checked_tokenizer,
    generating_progress,
    open_engine,
    option_error,
    parse_bins,
    parse_shard,
    print_build_report,
    stderr,
)

app = typer.Typer(
    add_completion=False,
    no_args_is_help=False,
    help="Generate MRCR rows in the exact openai/mrcr parquet schema. Without options: 4 needles, "
    "every bin, 100 rows per bin, offline writer, written to ./mrcr-data. With --recipe mrcr-v2: "
    "Google DeepMind's MRCR v2 (8 needles, the buckets up to 1048576, CSV in ./mrcr-v2-data).",
)


def make_writer(kind: str, seed: int, **options: Any):
    """The writer for `--writer`; for pool writers, checked against the request first.

    options: pool, model, base_url, per_pair, concurrency, cache_dir, temperature, max_tokens,
    price_in, price_out (writer settings) and needles, bins, tokens, rows (the request).
    """
    tokenizer = str(options.get("tokenizer") or "o200k_base")
    if kind == "offline":
        return OfflineWriter(seed, tokenizer=tokenizer)
    if kind not in ("pool", "openai"):
        raise CommandError(f"unknown writer {kind!r}; choose offline, pool or openai")
    from ..pool import PoolError, PoolTooSmall, PoolWriter
    from ..recipes.openai_mrcr._shortcut import check_pool, pool_requirements

    needles = tuple(options.get("needles") or (4,))
    max_tokens, where = pool_requirements(needles, options.get("bins") or BINS, options.get("tokens"))
    try:
        if kind == "openai":  # a pool built (or reused from the cache) for this request, already checked
            return PoolWriter.from_file(_build_openai_pool(seed, needles, max_tokens, where, options), tokenizer)
        if options.get("pool") is None:
            raise CommandError("--writer pool needs --pool PATH (a pool from `mrcr-gen pool harvest` or `pool build`)")
        pool_writer = PoolWriter.from_file(Path(options["pool"]), tokenizer)
        check_pool(pool_writer, needles, max_tokens, where)
    except (PoolError, PoolTooSmall) as exc:
        raise CommandError(str(exc)) from None
    return pool_writer


def _build_openai_pool(seed: int, needles: tuple, max_tokens: int, where: str, options: dict) -> Path:
    """`build_pool_for_request` with the --writer openai options, its summaries on stderr."""
    from ..recipes.openai_mrcr._pool_llm import BuildError
    from ..recipes.openai_mrcr._shortcut import WritingsFailed, build_pool_for_request

    if not options.get("model"):
        raise CommandError("--writer openai needs --model (e.g. gpt-4o, or the model your --base-url server serves)")
    try:
        return build_pool_for_request(
            model=options["model"],
            seed=seed,
            needles=needles,
            max_tokens=max_tokens,
            where=where,
            rows=int(options.get("rows") or 1),  # of the whole dataset (every shard), so shards plan alike
            cache_dir=options.get("cache_dir"),
            pool_path=options.get("pool"),
            per_pair=int(options.get("per_pair") or 1),
            concurrency=int(options.get("concurrency") or 16),
            base_url=options.get("base_url"),
            temperature=options.get("temperature"),
            max_tokens_per_writing=options.get("max_tokens"),
            price_in=options.get("price_in"),
            price_out=options.get("price_out"),
            console=stderr,
            on_report=print_build_report,
        )
    except WritingsFailed as exc:
        raise CommandError(str(exc), 1) from None
    except BuildError as exc:
        raise CommandError(str(exc)) from None


@app.callback(invoke_without_command=True)
def generate(
    ctx: typer.Context,
    recipe: str = typer.Option(
        "openai-mrcr",
        "--recipe",
        help=(
            "openai-mrcr (parquet in the openai/mrcr schema) or mrcr-v2 (Google DeepMind's MRCR v2: one flat text per "
            "row, CSV or parquet)."
        ),
    ),
    needles: list[int] = typer.Option(
        [],
        "--needles",
        "-n",
        help="Needle count (repeatable); 2, 4 and 8 are the standard ones. (default 4; mrcr-v2: 8)",
        show_default=False,
    ),
    bins: list[str] | None = typer.Option(
        None,
        "--bin",
        "-b",
        show_default=False,
        help=(
            "Upper edge of a token bin (repeatable), e.g. 65536, or 'all' (default all; mrcr-v2: the buckets up to "
            "1048576, 'all' goes on to 8388608)."
        ),
    ),
    samples: int = typer.Option(100, "--samples", "-s", min=1, help="Rows per bin and needle count."),
    seed: int = typer.Option(0, "--seed", help="Seed; the same command and seed give byte-identical files."),
    out: Path | None = typer.Option(
        None, "--out", "-o", help="Output directory (default mrcr-data; mrcr-v2: mrcr-v2-data).", show_default=False
    ),
    file_format: str = typer.Option(
        "csv", "--format", help="mrcr-v2 only: csv (the upstream layout) or parquet (the same columns)."
    ),
    rows_per_transcript: int = typer.Option(
        8,
        "--rows-per-transcript",
        min=1,
        help="mrcr-v2 only: rows drawn from one transcript at most (its (key, ordinal) pairs).",
    ),
    writer: str = typer.Option(
        "offline", "--writer", help="Source of writings: offline, pool (--pool PATH) or openai (--model M)."
    ),
    pool: Path | None = typer.Option(
        None, "--pool", help="Pool parquet file: read by --writer pool, written by --writer openai."
    ),
    model: str | None = typer.Option(None, "--model", help="--writer openai: model name (e.g. gpt-4o)."),
    base_url: str | None = typer.Option(
        None, "--base-url", help="--writer openai: API base URL (default $OPENAI_BASE_URL, else OpenAI)."
    ),
    per_pair: int = typer.Option(1, "--per-pair", min=1, help="--writer openai: writings per distractor ask."),
    concurrency: int = typer.Option(16, "--concurrency", min=1, help="--writer openai: requests in flight at most."),
    cache_dir: Path | None = typer.Option(
        None, "--cache-dir", help="--writer openai: writing cache (default ~/.cache/mrcr-gen)."
    ),
    temperature: float | None = typer.Option(None, "--temperature", help="--writer openai: sampling temperature."),
    max_tokens: int | None = typer.Option(None, "--max-tokens", min=1, help="--writer openai: max_tokens per writing."),
    price_in: float | None = typer.Option(
        None, "--price-in", help="--writer openai: USD per 1M prompt tokens (cost estimate)."
    ),
    price_out: float | None = typer.Option(None, "--price-out", help="--writer openai: USD per 1M completion tokens."),
    tokens: int | None = typer.Option(
        None,
        "--tokens",
        help=(
            "Target an exact token total instead of bins (within 1% from 16384 up; 4160..1048576, so that every row "
            "lies in a bin). Not with --bin."
        ),
    ),
    shard: str = typer.Option(
        "1/1", "--shard", help="Write only part K of N of the files, so N machines build one dataset."
    ),
    rows_per_file: int = typer.Option(
        400, "--rows-per-file", min=1, help="Rows per parquet file ({n}needle_{k}.parquet)."
    ),
    date_added: str = typer.Option(DEFAULT_DATE_ADDED, "--date-added", help="date_added column (MM-DD-YYYY)."),
    workers: int | None = typer.Option(
        None,
        "--workers",
        "-w",
        min=1,
        help=(
            "Processes (local engine) or local Ray CPUs [default: all cores]. Output is byte-identical for every value."
        ),
    ),
    engine: str = typer.Option(
        "local",
        "--engine",
        help=(
            "local: a process pool on this machine; ray: one Ray task per file or chunk of a large file (pip install "
            "'mrcr-gen[ray]'); --out must then be on a filesystem every node sees."
        ),
    ),
    address: str | None = typer.Option(
        None,
        "--address",
        help=(
            "--engine ray: the cluster to join (default $RAY_ADDRESS, else a local Ray instance on this machine's "
            "cores)."
        ),
    ),
    tokenizer: str = typer.Option("o200k_base", "--tokenizer", help=TOKENIZER_HELP + " Rows are binned by its count."),
) -> None:
    if ctx.invoked_subcommand is not None:
        return
    if tokens is not None and bins:
        raise CommandError("--tokens and --bin are exclusive: --tokens N replaces the bins with one token target")
    if recipe == "mrcr-v2":
        return generate_v2_command(
            needles=needles,
            bins=bins or [],
            tokens=tokens,
            samples=samples,
            seed=seed,
            out=out,
            file_format=file_format,
            rows_per_transcript=rows_per_transcript,
            shard=parse_shard(shard),
            writer=writer,
            model=model,
            base_url=base_url,
            concurrency=concurrency,
            cache_dir=cache_dir,
            temperature=temperature,
            max_tokens=max_tokens,
            tokenizer=checked_tokenizer(tokenizer),
        )
    if recipe != "openai-mrcr":
        raise CommandError(f"unknown recipe {recipe!r}; choose openai-mrcr or mrcr-v2")
    out = out or Path("mrcr-data")
    needles = needles or [4]
    # A local engine's workers start loading now, while the job is prepared (Ray starts later:
    # a usage error must not wait for a cluster).
    preload = worker_preload(tokenizer)
    runner = open_engine(engine, workers, address, preload=preload) if engine == "local" else None
    try:
        config = GenerateConfig(
            needles=tuple(needles),
            **({"tokens": tokens} if tokens is not None else {"bins": parse_bins(bins or [])}),
            samples=samples,
            seed=seed,
            out=out,
            rows_per_file=rows_per_file,
            shard=parse_shard(shard),
            date_added=date_added,
            tokenizer=checked_tokenizer(tokenizer),
        )
    except ValidationError as exc:
        raise CommandError(option_error(exc)) from None
    total = sum(len(f.rows) for f in config.shard_plan())
    chosen_writer = make_writer(
        writer,
        seed,
        pool=pool,
        model=model,
        base_url=base_url,
        per_pair=per_pair,
        concurrency=concurrency,
        cache_dir=cache_dir,
        temperature=temperature,
        max_tokens=max_tokens,
        price_in=price_in,
        price_out=price_out,
        needles=config.needles,
        bins=config.bins,
        tokens=config.tokens,
        rows=sum(len(f.rows) for f in config.plan()),
        tokenizer=config.tokenizer,
    )
    command = shlex.join(["mrcr-gen", *sys.argv[1:]])
    runner = runner or open_engine(engine, workers, address, preload=preload)
    with (
        runner,
        generating_progress() as progress,
    ):
        task = progress.add_task("rows", total=total)
        try:
            result = generate_dataset(
                config,
                chosen_writer,
                command=command,
                engine=runner,
                on_rows=lambda rows: progress.advance(task, rows),
                on_reused=lambda rows: progress.advance(task, rows),
            )
        except AssemblyError as exc:
            raise CommandError(str(exc)) from None
        except FileFailed as exc:
            raise CommandError(str(exc), EXIT_FINDINGS) from None
        except OSError as exc:  # e.g. --out names a file, or a directory we may not write to
            raise CommandError(f"cannot write {exc.filename or config.out}: {exc.strerror or exc}") from None
    print_summary(result.samples, config.out)


# --- mrcr-gen --recipe mrcr-v2 -------------------------------------------------------------------


def _buckets(values: list[str]) -> tuple:
    from ..recipes.mrcr_v2._generate import DEFAULT_V2_BUCKETS, V2_BUCKETS, v2_bucket

    return parse_bins(values, v2_bucket, DEFAULT_V2_BUCKETS, V2_BUCKETS)


def _writer(kind: str, seed: int, tokenizer: str, **options):
    from ..recipes.mrcr_v2._offline import V2OfflineWriter

    if kind == "offline":
        return V2OfflineWriter(seed, tokenizer=tokenizer)
    if kind != "openai":
        raise CommandError(f"--recipe mrcr-v2 takes --writer offline or openai, got {kind!r}")
    if not options.get("model"):
        raise CommandError("--writer openai needs --model (e.g. gpt-4o, or the model your --base-url server serves)")
    from .._openai import ChatError
    from ..recipes.mrcr_v2._llm import V2OpenAIWriter, WritingsFailed

    writer = V2OpenAIWriter(
        options["model"],
        base_url=options.get("base_url"),
        cache_dir=options.get("cache_dir"),
        concurrency=options.get("concurrency") or 16,
        temperature=options.get("temperature"),
        max_tokens=options.get("max_tokens"),
        tokenizer=tokenizer,
    )
    keys = writer.catalog_keys()
    stderr.print(f"requesting the catalog's {len(keys)} writings from {options['model']} (cached ones are reused)")
    try:
        writer.prefetch(keys)
    except ChatError as exc:
        raise CommandError(str(exc)) from None
    except WritingsFailed as exc:
        raise CommandError(str(exc), 1) from None
    return writer


def generate_v2_command(
    *,
    needles,
    bins,
    tokens,
    samples,
    seed,
    out,
    file_format,
    rows_per_transcript,
    shard,
    writer,
    tokenizer="o200k_base",
    **options,
) -> None:
    from ..recipes.mrcr_v2._generate import V2Config, generate_v2

    try:
        config = V2Config(
            needles=tuple(needles or [8]),
            buckets=_buckets(bins),
            tokens=tokens,
            samples=samples,
            seed=seed,
            out=out or Path("mrcr-v2-data"),
            format=file_format,
            rows_per_transcript=rows_per_transcript,
            shard=shard,
            tokenizer_spec=tokenizer,
        )
    except ValidationError as exc:
        raise CommandError(option_error(exc)) from None
    chosen = _writer(writer, seed, tokenizer, **options)
    total = samples * len(config.shard_files())
    command = shlex.join(["mrcr-gen", *sys.argv[1:]])
    with generating_progress() as progress:
        task = progress.add_task("rows", total=total)
        try:
            summaries = generate_v2(
                config,
                chosen,
                command=command,
                on_row=lambda _: progress.advance(task),
                on_reused=lambda rows: progress.advance(task, rows),
            )
        except AssemblyError as exc:
            raise CommandError(str(exc)) from None
        except OSError as exc:
            raise CommandError(f"cannot write {exc.filename or config.out}: {exc.strerror or exc}") from None
    table = Table(title=f"MRCR v2 rows written to {config.out}")
    for column in ("needles", "bucket", "rows", "transcripts", "min context_len", "median", "max"):
        table.add_column(column, justify="right")
    for s in summaries:
        table.add_row(*(str(s[k]) for k in ("n_needles", "bucket", "rows", "transcripts", "min", "median", "max")))
    Console().print(table)


@app.command()
def schemas(
    out: Path = typer.Option(Path("schemas"), "--out", "-o", help="Directory for the *.schema.json files."),
    check: bool = typer.Option(False, "--check", help="Only report schema files that are out of date (exit 1 if any)."),
) -> None:
    """Export the JSON Schema of every data model (the Pydantic models are the source of truth)."""
    if check:
        stale = stale_schemas(out, RECIPES)
        for name in stale:
            print(f"out of date: {out / name}")
        raise typer.Exit(1 if stale else 0)
    for path in export_schemas(out, RECIPES):
        print(path)


def print_summary(samples, out: Path) -> None:
    table = Table(title=f"Rows written to {out}")
    for column in ("needles", "bin", "rows", "min tokens", "median", "max tokens"):
        table.add_column(column, justify="right")
    for group in summarize(samples):
        table.add_row(*(str(group[k]) for k in ("n_needles", "bin", "rows", "min", "median", "max")))
    Console().print(table)
