"""openai/mrcr files through the recipe-neutral validation pipeline: its parquet layout, its row
checks and their report order, and its fixer, declared once (`SPEC`)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from ...engines import Engine
from ...validate import (
    CheckContext,
    CheckSpec,
    Finding,
    ParquetRows,
    ProgressCallback,
    RepairResult,
    RowResult,
    ValidationReport,
    _files,
    _repair,
)
from ._checks import INT_COLUMNS, check_row
from ._probes import PROBES
from ._repair import fix_record
from ._rows import MRCR_SCHEMA

#: Every check name openai/mrcr's validation emits, in report order. `file` is a file that could not be read.
CHECKS: tuple[str, ...] = (
    "file",
    "schema",
    "duplicate_row",
    "duplicate_prompt",
    "prompt_json",
    "text_encoding",
    "structure",
    "final_query",
    "random_string",
    "needle_count",
    "near_duplicate_ask",
    "needle_ask_elsewhere",
    "ask_form",
    "desired_index",
    "ground_truth",
    "answer_prefix",
    "empty_writing",
    "duplicate_needle_response",
    "ambiguous_needle_response",
    "near_duplicate_needle_response",
    "total_messages",
    "n_chars",
    "token_bin",
    "date_added",
)


class RowChecks:
    """openai/mrcr's checker: every row on its own (no state across rows, so any row range of a file
    can be checked apart, by one worker each)."""

    def __init__(self, context: CheckContext) -> None:
        self.context = context

    def check(self, record: dict[str, Any], row: int) -> RowResult:
        context = self.context
        return check_row(
            record,
            file=context.file,
            row=row,
            count_tokens=context.count_tokens,
            skip_columns=context.skip_columns,
            tokenizer=context.tokenizer,
        )

    def finish(self) -> list[Finding]:
        return []


#: What the pipeline needs of openai/mrcr files.
SPEC = CheckSpec(
    reader=ParquetRows(schema=MRCR_SCHEMA, int_columns=frozenset(INT_COLUMNS)),
    checker=RowChecks,
    check_names=CHECKS,
    counted="prompt + answer recount",
    fix_record=fix_record,
    probes=PROBES,
    prompt_column="prompt",
)


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
        spec=SPEC,
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
    return validate_paths(
        [path],
        tokens=tokens,
        workers=workers,
        engine=engine,
        progress=progress,
        strict=strict,
        tokenizer=tokenizer,
    )


def repair(paths: Sequence[str | os.PathLike], output: str | os.PathLike, **options: Any) -> RepairResult:
    """`mrcr-validate --clean/--fix` on openai/mrcr files: see `mrcr_gen.validate.repair` for the options."""
    return _repair.repair(paths, output, spec=SPEC, **options)
