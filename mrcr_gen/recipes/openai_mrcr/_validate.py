"""openai/mrcr files through the recipe-neutral streaming validator: its row layout and checks bound in."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from ...engines import Engine
from ...validate import ProgressCallback, RepairResult, RowChecks, ValidationReport, _files, _repair
from ._checks import INT_COLUMNS, check_row
from ._repair import fix_record
from ._rows import MRCR_SCHEMA

#: What the validator needs of openai/mrcr rows.
ROWS = RowChecks(schema=MRCR_SCHEMA, int_columns=frozenset(INT_COLUMNS), check_row=check_row, fix_record=fix_record)


def validate_paths(
    paths: Sequence[str | os.PathLike] | str | os.PathLike,
    *,
    tokens: bool = True,
    workers: int | None = None,
    engine: Engine | None = None,
    progress: ProgressCallback | None = None,
    strict: bool = False,
    tokenizer: str | None = None,
) -> ValidationReport:
    """Validate openai/mrcr parquet files, directories, globs and hf:// paths; return every finding
    and the summary (`strict`: warnings count as errors). `tokenizer` (a spec) recounts the tokens;
    by default the one each file's dataset card names, else o200k_base."""
    return _files.validate_paths(
        paths,
        rows=ROWS,
        tokens=tokens,
        workers=workers,
        engine=engine,
        progress=progress,
        strict=strict,
        tokenizer=tokenizer,
    )


def validate_file(
    path: str | os.PathLike,
    *,
    tokens: bool = True,
    workers: int | None = None,
    engine: Engine | None = None,
    progress: ProgressCallback | None = None,
    strict: bool = False,
    tokenizer: str | None = None,
) -> ValidationReport:
    """Validate one openai/mrcr parquet file (streamed; tokens recounted over `workers` processes)."""
    return _files.validate_file(
        path,
        rows=ROWS,
        tokens=tokens,
        workers=workers,
        engine=engine,
        progress=progress,
        strict=strict,
        tokenizer=tokenizer,
    )


def repair(paths: Sequence[str | os.PathLike], output: str | os.PathLike, **options: Any) -> RepairResult:
    """`mrcr-validate --clean/--fix` on openai/mrcr files: see `mrcr_gen.validate.repair` for the options."""
    return _repair.repair(paths, output, rows=ROWS, **options)
