"""`mrcr-gen`: generate MRCR datasets."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from .._request import GenerateRequest
from .._schemas import export_schemas, stale_schemas
from ..recipes import RECIPES, recipe_named
from ..recipes.openai_mrcr._config import DEFAULT_DATE_ADDED
from ._common import TOKENIZER_HELP, CommandError, generating_bar, stderr

app = typer.Typer(
    add_completion=False,
    no_args_is_help=False,
    help="Generate MRCR rows in the exact openai/mrcr parquet schema. Without options: 4 needles, "
    "every bin, 100 rows per bin, offline writer, written to ./mrcr-data. With --recipe mrcr-v2: "
    "Google DeepMind's MRCR v2 (8 needles, the buckets up to 1048576, CSV in ./mrcr-v2-data).",
)


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
    overwrite: bool = typer.Option(
        False,
        "--overwrite",
        help=(
            "Replace what another generation (other options) wrote to --out: the files its card lists are removed "
            "first. Without it such a folder is refused; a rerun of the same command resumes."
        ),
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
    try:
        chosen = recipe_named(recipe)
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    request = GenerateRequest(
        needles=tuple(needles),
        bins=tuple(bins or ()),
        tokens=tokens,
        samples=samples,
        seed=seed,
        out=out,
        file_format=file_format,
        rows_per_transcript=rows_per_transcript,
        rows_per_file=rows_per_file,
        shard=shard,
        overwrite=overwrite,
        date_added=date_added,
        tokenizer=tokenizer,
        writer=writer,
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
        workers=workers,
        engine=engine,
        address=address,
        command=shlex.join(["mrcr-gen", *sys.argv[1:]]),
        messages=stderr,
    )
    written = chosen.generate(request, generating_bar)
    table = Table(title=written.title)
    for column in written.columns:
        table.add_column(column, justify="right")
    for row in written.rows:
        table.add_row(*row)
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
