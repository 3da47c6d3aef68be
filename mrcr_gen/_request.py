"""What a command asks of a recipe (`GenerateRequest` and its checks, from the generation core;
`ValidateRequest`) and what comes back. A request the recipe cannot meet raises `RequestError`: one
line for the user, and the exit code scripts rely on (2: bad input or usage; 1: some output failed).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ._errors import EXIT_FAILED, EXIT_USAGE, RequestError
from .engines import Engine
from .generate import (
    Generated,
    GenerateRequest,
    ProgressBar,
    check_out_folder,
    checked_tokenizer,
    open_engine,
    option_error,
    parse_bins,
    parse_shard,
)


@dataclass(frozen=True)
class ValidateRequest:
    """`mrcr-validate`'s options. `mode` "clean"/"fix" writes the rows kept to `out`."""

    tokens: bool = True
    workers: int | None = None
    engine: Engine | None = None
    strict: bool = False
    tokenizer: str | None = None
    mode: Literal["check", "clean", "fix"] = "check"
    out: Path | None = None
    progress: Callable[[str, int, int | None], None] | None = None  # (file, rows done now, rows of the file)
    on_change: Callable[[str], None] | None = None  # one line per fixed or dropped row


__all__ = [
    "EXIT_FAILED",
    "EXIT_USAGE",
    "GenerateRequest",
    "Generated",
    "ProgressBar",
    "RequestError",
    "ValidateRequest",
    "check_out_folder",
    "checked_tokenizer",
    "open_engine",
    "option_error",
    "parse_bins",
    "parse_shard",
]
