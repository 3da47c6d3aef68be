"""What every command shares: one-line errors, exit codes, a stderr console."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from .._bins import BINS, bin_by_upper
from .._paths import find_parquet_files

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2

stderr = Console(stderr=True)


def generating_progress() -> Progress:
    """The progress bar of `mrcr-gen` (rows written), on stderr so that stdout stays for results."""
    return Progress(
        TextColumn("[bold]generating"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=stderr,
    )


class CommandError(Exception):
    """A problem with the user's input: printed as one line, exit code 2 unless given."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def parquet_inputs(paths: list[str], v2_csv: bool = False) -> list[Path]:
    """The parquet files named by files, directories and globs; a CommandError if any names none.
    `v2_csv`: directories also give their MRCR v2 CSV files."""
    csv_filter = None
    if v2_csv:
        from ..recipes.mrcr_v2._rows import is_v2_csv

        csv_filter = is_v2_csv
    files, problems = find_parquet_files(paths, csv_filter)
    if problems:
        raise CommandError("; ".join(f"{text}: {message}" for text, message in problems))
    return files


def open_engine(kind: str, workers: int | None, address: str | None, *, preload: tuple[str, ...] = ()):
    """The engine for `--engine/--workers/--address`, or a one-line error."""
    from ..engines import make_engine

    if address is not None and kind != "ray":
        raise CommandError("--address is for --engine ray")
    try:
        return make_engine(kind, workers=workers, address=address, preload=preload)
    except ValueError as exc:
        raise CommandError(f"--engine: {exc}") from None
    except (RuntimeError, ConnectionError) as exc:  # Ray missing, or no cluster at --address
        raise CommandError(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__) from None


TOKENIZER_HELP = (
    "Tokenizer that counts: o200k_base (default, the benchmark's), another tiktoken encoding, "
    "hf:PATH (a tokenizer.json or a folder holding one) or hf:ORG/NAME (a Hub model's, cached)."
)


def checked_tokenizer(spec: str) -> str:
    """The spec, once it loads (so a bad one is a one-line error before any work starts)."""
    from .._tokens import TokenizerError, load_tokenizer

    try:
        load_tokenizer(spec)
    except TokenizerError as exc:
        raise CommandError(f"--tokenizer: {exc}") from None
    return spec


def one_line(error: ValidationError) -> str:
    """The first problem of a pydantic error as `field: message`."""
    first = error.errors()[0]
    message = first["msg"].removeprefix("Value error, ")
    where = ".".join(str(part) for part in first["loc"])
    return f"{where}: {message}" if where else message


def run_app(app: typer.Typer, prog_name: str, args: list[str] | None = None) -> None:
    """Run a typer app; usage errors and CommandError become `prog: error: ...` and exit 2."""
    command = typer.main.get_command(app)
    try:
        code = command.main(args=args, prog_name=prog_name, standalone_mode=False)
    except CommandError as exc:
        print(f"{prog_name}: error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        print(f"{prog_name}: interrupted", file=sys.stderr)
        sys.exit(130)
    except Exception as exc:
        # Usage errors: click's classes, or typer's vendored copies of them in newer releases.
        if not (hasattr(exc, "format_message") and hasattr(exc, "exit_code")):
            raise
        print(f"{prog_name}: error: {exc.format_message()}", file=sys.stderr)
        sys.exit(exc.exit_code)
    sys.exit(code if isinstance(code, int) else EXIT_OK)


def parse_bins(
    values: list[str], by_upper: Callable[[int], Any] = bin_by_upper, default: tuple = BINS, every: tuple = BINS
) -> tuple:
    """`--bin` values: upper edges looked up with `by_upper` (which raises ValueError for an unknown
    edge), `default` when none is given, `every` for 'all'."""
    if not values:
        return default
    if "all" in values:
        return every
    uppers = []
    for value in dict.fromkeys(values):
        try:
            uppers.append(int(value))
        except ValueError:
            raise CommandError(f"--bin takes an upper edge or 'all', got {values}") from None
    try:
        return tuple(by_upper(upper) for upper in uppers)
    except ValueError as exc:
        raise CommandError(f"--bin: {exc}") from None


def option_error(error: ValidationError) -> str:
    """The first problem of the config, named by the option the user typed (not its field)."""
    first = error.errors()[0]
    message = first["msg"].removeprefix("Value error, ")
    return f"--{str(first['loc'][0]).replace('_', '-')}: {message}" if first["loc"] else message


def parse_shard(value: str) -> tuple[int, int]:
    try:
        index, count = (int(part) for part in value.split("/"))
    except ValueError:
        raise CommandError(f"--shard takes K/N (e.g. 1/4), got {value!r}") from None
    if not 1 <= index <= count:
        raise CommandError(f"--shard {value}: K must be between 1 and N")
    return index, count


def print_build_report(report) -> None:
    """A build report's summary lines on stderr."""
    for line in report.summary_lines():
        stderr.print(line, markup=False, highlight=False, soft_wrap=True)
