"""What every command shares: one-line errors, exit codes, a stderr console, the progress bar, the
inputs named on the command line (`checked_tokenizer` and `open_engine` come from `mrcr_gen._request`)."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

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

from .._errors import RequestError
from .._ownership import UnclaimedFile
from .._paths import find_parquet_files
from ..generate import checked_tokenizer, open_engine

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2
#: `mrcr-eval report` of a run whose Batch API batches are still running: its numbers are partial.
EXIT_PENDING = 3
#: As a shell reports them: 128 + the signal's number.
EXIT_INTERRUPTED, EXIT_TERMINATED = 128 + signal.SIGINT, 128 + signal.SIGTERM

stderr = Console(stderr=True)


@contextmanager
def generating_bar(total: int) -> Iterator[Callable[[int], None]]:
    """The progress bar of `mrcr-gen` (rows written, of `total`), on stderr so that stdout stays
    for results; yields `advance(rows)` (a recipe's `generate` is given this)."""
    progress = Progress(
        TextColumn("[bold]generating"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=stderr,
    )
    with progress:
        task = progress.add_task("rows", total=total)
        yield lambda rows: progress.advance(task, rows)


class CommandError(RequestError):
    """A problem with the user's input: printed as one line, exit code 2 unless given."""


def data_inputs(paths: list[str], with_csv: bool = False) -> list[Path]:
    """The parquet files named by files, directories and globs; a CommandError if any names none,
    or names a readable file that no recipe (or more than one) claims: refused before any work.
    `with_csv`: directories also give the CSV files a recipe finds there (MRCR v2's)."""
    from .._ownership import owner_of
    from ..recipes import RECIPES, found_csv

    files, problems = find_parquet_files(paths, found_csv if with_csv else None)
    if problems:
        raise CommandError("; ".join(f"{text}: {message}" for text, message in problems))
    try:
        for file in files:
            owner_of(file, RECIPES)  # a file that cannot be read is the command's to report, as it always was
    except UnclaimedFile as exc:
        raise CommandError(str(exc)) from None
    return files


TOKENIZER_HELP = (
    "Tokenizer that counts: o200k_base (default, the benchmark's), another tiktoken encoding, "
    "hf:PATH (a tokenizer.json or a folder holding one) or hf:ORG/NAME (a Hub model's, cached)."
)

NO_CACHE_HELP = (
    "Count every row's tokens anew: neither read nor add to the count cache in the user cache folder "
    "(the counts a generated file's sidecar vouches for are still used)."
)


def print_warnings(warnings: list[str]) -> None:
    """A report's warnings (e.g. rows that lost their context), one line each on stderr."""
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)


def one_line(error: ValidationError) -> str:
    """The first problem of a pydantic error as `field: message`."""
    first = error.errors()[0]
    message = first["msg"].removeprefix("Value error, ")
    where = ".".join(str(part) for part in first["loc"])
    return f"{where}: {message}" if where else message


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the command is, so that it stops as on Ctrl-C: the units still
    running are stopped, temporary files removed, a local Ray instance shut down."""


@dataclass
class Termination:
    """Whether SIGTERM arrived (typer turns the interruption it raises into an exit code)."""

    received: bool = False


@contextmanager
def terminating_as_interrupt() -> Iterator[Termination]:
    """Within: SIGTERM raises `Terminated` (a KeyboardInterrupt). Python's default would end the
    process at once, leaving its workers and a Ray instance it started running."""
    termination = Termination()
    if threading.current_thread() is not threading.main_thread():  # only the main thread has handlers
        yield termination
        return

    def terminate(signum: int, frame: object) -> None:
        # Once is enough: a second SIGTERM must not cut the clean-up short (SIGKILL still can).
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        termination.received = True
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield termination
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_app(app: typer.Typer, prog_name: str, args: list[str] | None = None) -> None:
    """Run a typer app; usage errors, CommandError and RequestError become `prog: error: ...` and
    exit 2; Ctrl-C and SIGTERM stop it the same way (exit 130 and 143)."""
    command = typer.main.get_command(app)
    with terminating_as_interrupt() as termination:
        try:
            code = command.main(args=args, prog_name=prog_name, standalone_mode=False)
        except (RequestError, UnclaimedFile) as exc:  # CommandError, a recipe's refusal, a file no recipe owns
            if not termination.received:
                print(f"{prog_name}: error: {exc}", file=sys.stderr)
                sys.exit(getattr(exc, "exit_code", EXIT_USAGE))
            code = EXIT_TERMINATED
        except (typer.Abort, KeyboardInterrupt):
            code = EXIT_INTERRUPTED
        except Exception as exc:
            # Usage errors: click's classes, or typer's vendored copies of them in newer releases.
            if not (hasattr(exc, "format_message") and hasattr(exc, "exit_code")):
                raise
            print(f"{prog_name}: error: {exc.format_message()}", file=sys.stderr)
            sys.exit(exc.exit_code)
    if termination.received:
        print(f"{prog_name}: terminated", file=sys.stderr)
        sys.exit(EXIT_TERMINATED)
    if code == EXIT_INTERRUPTED:  # typer returns it for a KeyboardInterrupt
        print(f"{prog_name}: interrupted", file=sys.stderr)
    sys.exit(code if isinstance(code, int) else EXIT_OK)


def leave_at_once(code: int | str | None) -> NoReturn:
    """End the process as `sys.exit(code)` would, without the interpreter's teardown: the exit
    handlers run and the output is flushed, but the objects of the run are not freed one by one
    (0.1-0.2 s after a generation of large files). What the interpreter does before its teardown
    is done as it would: threads' exit hooks run and the threads still running are waited for (a
    pool's idle threads end; a thread still writing a file finishes it), then the exit handlers."""
    import atexit
    import os

    if isinstance(code, str):
        print(code, file=sys.stderr)
    wait_for_threads = getattr(threading, "_shutdown", None)  # Py_FinalizeEx's first step
    if wait_for_threads is not None:
        wait_for_threads()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code if isinstance(code, int) else 0 if code is None else 1)


__all__ = [
    "EXIT_FINDINGS",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_PENDING",
    "EXIT_TERMINATED",
    "EXIT_USAGE",
    "TOKENIZER_HELP",
    "CommandError",
    "Terminated",
    "checked_tokenizer",
    "data_inputs",
    "generating_bar",
    "one_line",
    "open_engine",
    "run_app",
    "stderr",
]
