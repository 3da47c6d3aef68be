"""`mrcr-gen`: generate MRCR datasets."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Optional

import typer
from pydantic import ValidationError
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.console import Console
from rich.table import Table

from .._assembler import AssemblyError
from .._bins import BINS, bin_by_upper
from .._schemas import export_schemas, stale_schemas
from .._generate import DEFAULT_DATE_ADDED, GenerateConfig, generate_dataset, summarize
from ..writers import OfflineWriter
from ._common import CommandError, one_line, run_app, stderr

app = typer.Typer(
    add_completion=False,
    no_args_is_help=False,
    help="Generate MRCR rows in the exact openai/mrcr parquet schema. Without options: 4 needles, "
    "every bin, 100 rows per bin, offline writer, written to ./mrcr-data.",
)


def parse_bins(values: list[str]) -> tuple:
    if not values or "all" in values:
        return BINS
    try:
        return tuple(bin_by_upper(int(v)) for v in dict.fromkeys(values))
    except ValueError as exc:
        raise CommandError(f"--bin: {exc}" if "no bin" in str(exc) else f"--bin takes an upper edge or 'all', got {values}") from None


def parse_shard(value: str) -> tuple[int, int]:
    try:
        index, count = (int(part) for part in value.split("/"))
    except ValueError:
        raise CommandError(f"--shard takes K/N (e.g. 1/4), got {value!r}") from None
    if not 1 <= index <= count:
        raise CommandError(f"--shard {value}: K must be between 1 and N")
    return index, count


def make_writer(kind: str, seed: int, **options: object):
    if kind == "offline":
        return OfflineWriter(seed)
    raise CommandError(f"unknown writer {kind!r}; choose offline")


@app.callback(invoke_without_command=True)
def generate(
    ctx: typer.Context,
    needles: list[int] = typer.Option([4], "--needles", "-n", help="Needle count (repeatable); 2, 4 and 8 are the standard ones."),
    bins: list[str] = typer.Option(["all"], "--bin", "-b", help="Upper edge of a token bin (repeatable), e.g. 65536, or 'all'."),
    samples: int = typer.Option(100, "--samples", "-s", min=1, help="Rows per bin and needle count."),
    seed: int = typer.Option(0, "--seed", help="Seed; the same command and seed give byte-identical files."),
    out: Path = typer.Option(Path("mrcr-data"), "--out", "-o", help="Output directory."),
    writer: str = typer.Option("offline", "--writer", help="Source of writings: offline."),
    tokens: Optional[int] = typer.Option(None, "--tokens", min=4096, help="Target an exact token total instead of bins (within 1% from 16384 up)."),
    shard: str = typer.Option("1/1", "--shard", help="Write only part K of N of the files, so N machines build one dataset."),
    rows_per_file: int = typer.Option(400, "--rows-per-file", min=1, help="Rows per parquet file ({n}needle_{k}.parquet)."),
    date_added: str = typer.Option(DEFAULT_DATE_ADDED, "--date-added", help="date_added column (MM-DD-YYYY)."),
) -> None:
    if ctx.invoked_subcommand is not None:
        return
    try:
        config = GenerateConfig(
            needles=tuple(needles),
            bins=parse_bins(bins),
            tokens=tokens,
            samples=samples,
            seed=seed,
            out=out,
            rows_per_file=rows_per_file,
            shard=parse_shard(shard),
            date_added=date_added,
        )
    except ValidationError as exc:
        raise CommandError(one_line(exc)) from None
    chosen_writer = make_writer(writer, seed)
    total = sum(len(f.rows) for f in config.shard_plan())
    command = shlex.join(["mrcr-gen", *sys.argv[1:]])
    with Progress(
        TextColumn("[bold]generating"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn(),
        console=stderr, transient=False,
    ) as progress:
        task = progress.add_task("rows", total=total)
        try:
            result = generate_dataset(config, chosen_writer, command=command, on_row=lambda _: progress.advance(task))
        except AssemblyError as exc:
            raise CommandError(str(exc)) from None
    print_summary(result.samples, config.out)


@app.command()
def schemas(
    out: Path = typer.Option(Path("schemas"), "--out", "-o", help="Directory for the *.schema.json files."),
    check: bool = typer.Option(False, "--check", help="Only report schema files that are out of date (exit 1 if any)."),
) -> None:
    """Export the JSON Schema of every data model (the Pydantic models are the source of truth)."""
    if check:
        stale = stale_schemas(out)
        for name in stale:
            print(f"out of date: {out / name}")
        raise typer.Exit(1 if stale else 0)
    for path in export_schemas(out):
        print(path)


def print_summary(samples, out: Path) -> None:
    table = Table(title=f"Rows written to {out}")
    for column in ("needles", "bin", "rows", "min tokens", "median", "max tokens"):
        table.add_column(column, justify="right")
    for group in summarize(samples):
        table.add_row(*(str(group[k]) for k in ("n_needles", "bin", "rows", "min", "median", "max")))
    Console().print(table)


def main(args: list[str] | None = None) -> None:
    run_app(app, "mrcr-gen", args)
