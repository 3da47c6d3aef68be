"""What `mrcr-validate` asks of a recipe (`ValidateRequest`). `mrcr-gen`'s request and its checks
live with the generation core (`mrcr_gen.generate`), `RequestError` in `mrcr_gen._errors`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .engines import Engine


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
    shortcuts: bool = False  # run the shortcut probes (`--shortcuts`)


__all__ = ["ValidateRequest"]
