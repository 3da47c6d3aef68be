"""What `mrcr-gen` asks of a recipe (`GenerateRequest`: the options every recipe shares, and the
recipe's own declared ones), what comes back (`Generated`), and the checks of the shared options.
A request the recipe cannot meet raises `RequestError` (one line, exit 2 unless given)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from rich.console import Console

from .._bins import BINS, bin_by_upper
from .._errors import RequestError
from ..engines import Engine

#: Given the rows to write, a context in which the yielded `advance(rows)` moves the user's progress bar.
ProgressBar = Callable[[int], AbstractContextManager[Callable[[int], None]]]


@dataclass(frozen=True)
class GenerateRequest:
    """`mrcr-gen`'s options as the user gave them; a recipe applies its own defaults to those left
    None or empty (needles, bins, output folder) and refuses what it does not support. `options`:
    the recipe's own options (`GenOption`), by name."""

    needles: tuple[int, ...] = ()
    bins: tuple[str, ...] = ()  # upper edges as typed, or "all"
    tokens: int | None = None
    samples: int = 100
    seed: int = 0
    out: Path | None = None
    shard: str = "1/1"
    overwrite: bool = False  # replace another generation's files in `out` (else refused)
    tokenizer: str = "o200k_base"
    writer: str = "offline"
    workers: int | None = None
    engine: str = "local"
    address: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    command: str = "mrcr-gen"  # the command line, recorded in the dataset card
    messages: Console = field(default_factory=lambda: Console(stderr=True))  # notes for the user (stderr)


@dataclass(frozen=True)
class Generated:
    """What was written, as the table `mrcr-gen` prints: its title, columns and rows."""

    title: str
    columns: tuple[str, ...]
    rows: list[tuple[str, ...]]


def check_out_folder(out: Path) -> None:
    """Refuse an `--out` that names a file, before any work or note is printed."""
    if out.exists() and not out.is_dir():
        raise RequestError(f"cannot write {out}: Not a directory")


def parse_bins(
    values: tuple[str, ...] | list[str],
    by_upper: Callable[[int], Any] = bin_by_upper,
    default: tuple = BINS,
    every: tuple = BINS,
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
            raise RequestError(f"--bin takes an upper edge or 'all', got {list(values)}") from None
    try:
        return tuple(by_upper(upper) for upper in uppers)
    except ValueError as exc:
        raise RequestError(f"--bin: {exc}") from None


def parse_shard(value: str) -> tuple[int, int]:
    try:
        index, count = (int(part) for part in value.split("/"))
    except ValueError:
        raise RequestError(f"--shard takes K/N (e.g. 1/4), got {value!r}") from None
    if not 1 <= index <= count:
        raise RequestError(f"--shard {value}: K must be between 1 and N")
    return index, count


def option_error(error: ValidationError) -> str:
    """The first problem of a config, named by the option the user typed (not its field)."""
    first = error.errors()[0]
    message = first["msg"].removeprefix("Value error, ")
    return f"--{str(first['loc'][0]).replace('_', '-')}: {message}" if first["loc"] else message


def checked_tokenizer(spec: str) -> str:
    """The spec, once it loads (so a bad one is a one-line error before any work starts)."""
    from .._tokens import TokenizerError, load_tokenizer

    try:
        load_tokenizer(spec)
    except TokenizerError as exc:
        raise RequestError(f"--tokenizer: {exc}") from None
    return spec


def open_engine(kind: str, workers: int | None, address: str | None, *, preload: tuple[str, ...] = ()) -> Engine:
    """The engine for `--engine/--workers/--address`, or a one-line error."""
    from ..engines import make_engine

    if address is not None and kind != "ray":
        raise RequestError("--address is for --engine ray")
    try:
        return make_engine(kind, workers=workers, address=address, preload=preload)
    except ValueError as exc:
        raise RequestError(f"--engine: {exc}") from None
    except (RuntimeError, ConnectionError) as exc:  # Ray missing, or no cluster at --address
        raise RequestError(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__) from None
