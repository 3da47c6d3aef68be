"""What the streaming validator needs to know of one recipe's parquet rows (recipes supply it)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ._findings import RowResult

#: `fix(record, file=, row=)` -> (the rewritten record, the checks it fixed), or None when the row
#: cannot be recovered from its own prompt.
RecordFix = Callable[..., "tuple[dict[str, Any], list[str]] | None"]


@dataclass(frozen=True)
class RowChecks:
    """A recipe's parquet row layout and its row checks. Every field pickles (by reference for the
    functions, which are module-level), because engines ship it to their workers with each unit."""

    schema: pa.Schema  # the expected columns, in order, with their types
    int_columns: frozenset[str]  # columns where any integer type is acceptable (a warning, not an error)
    #: check_row(record, *, file, row, count_tokens, skip_columns, tokenizer) -> RowResult
    check_row: Callable[..., RowResult]
    #: rows whose ground truth is recoverable, rewritten (`--fix`); None: the recipe repairs nothing
    fix_record: RecordFix | None = None
