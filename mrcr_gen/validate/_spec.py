"""What the validation pipeline needs to know of one recipe's files (recipes declare it): how a
file's rows are read and written (`RowReader`), and the checker its rows are streamed to
(`RowChecker`), which may keep state across the rows it sees."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from .._tokens import DEFAULT_TOKENIZER
from ._duplicates import row_digests
from ._findings import Finding, RowResult
from ._shortcuts import ProbeOutcome, ProbeSpec, probe_record

#: `fix(record, file=, row=)` -> (the rewritten record, the checks it fixed), or None when the row
#: cannot be recovered from its own prompt.
RecordFix = Callable[..., "tuple[dict[str, Any], list[str]] | None"]


class Batch(Protocol):
    """Some consecutive rows of a file as the reader gives them (a `pa.RecordBatch`, say)."""

    @property
    def num_rows(self) -> int: ...

    def to_pylist(self) -> list[dict[str, Any]]: ...


@dataclass
class FileScan:
    """One file as its reader opened it (header or footer only), then filled in by the pipeline."""

    file: str
    #: Rows may be read: the file opened and nothing the reader found rules its rows out.
    readable: bool = False
    num_rows: int | None = None  # None: not known before the rows are read (a CSV file)
    schema: pa.Schema | None = None  # the file's columns, when it has an arrow schema
    #: The parquet footer, when the file may be cut into row ranges checked apart (`CheckSpec.whole_files` off).
    metadata: pq.FileMetaData | None = None
    columns: list[str] | None = None  # the columns the checks read (None: all)
    unusable_columns: set[str] = field(default_factory=set)  # missing or wrongly typed: the checks skip them
    early_findings: list[Finding] = field(default_factory=list)  # file-level findings reported before its rows
    closing_findings: list[Finding] = field(default_factory=list)  # its checkers' `finish`, after its rows
    file_findings: list[Finding] = field(default_factory=list)  # ... and then these (reading stopped, say)
    units: list[tuple[int, int | None]] = field(default_factory=list)  # (first row, rows) checked together
    tokenizer: str = DEFAULT_TOKENIZER  # what recounts the file's tokens

    @property
    def rows_known(self) -> int:
        return self.num_rows or 0


class RowWriter(Protocol):
    """An output file being written (`--clean`/`--fix`); it appears when its context exits without error."""

    def write_batch(self, batch: Any) -> None: ...

    def write_records(self, records: list[dict[str, Any]]) -> None: ...


class RowReader(Protocol):
    """How a recipe's files are opened, read in row ranges and written. Pickles (engines ship it)."""

    def open(self, path: Path, file: str) -> FileScan:
        """The file's header or footer: its findings, rows and columns; no row is read."""
        ...

    def read(
        self, path: Path, first: int = 0, count: int | None = None, columns: list[str] | None = None
    ) -> Iterator[Batch]:
        """Rows `first` .. `first + count` (None: to the end) in small batches."""
        ...

    def writer(self, target: Path, scan: FileScan) -> AbstractContextManager[RowWriter]:
        """An output file like the input `scan` describes, written atomically at `target`."""
        ...


@dataclass(frozen=True)
class CheckContext:
    """What a checker is told of the file whose rows it checks."""

    file: str
    count_tokens: bool  # recount tokens (the tokenizer loads)
    tokenizer: str  # the spec that recounts
    recorded_tokenizer: str | None = None  # the one the file's card or sidecar names (None: unrecorded)
    skip_columns: frozenset[str] = frozenset()  # columns the checks must not read (missing or wrongly typed)
    threads: int = 1  # threads the checker may use (a file checked in this process)
    probes: bool = False  # run the recipe's shortcut probes on each row (`--shortcuts`)


class RowChecker(Protocol):
    """Checks rows of one file in row order; it may keep state across them (a cross-row check).
    A file a recipe lets the pipeline cut (`CheckSpec.whole_files` off) gets one checker per row
    range, created in the worker; otherwise one for the whole file."""

    def check(self, record: dict[str, Any], row: int) -> RowResult:
        """Every finding of one raw row (0-based `row` in the file)."""
        ...

    def finish(self) -> Sequence[Finding]:
        """Findings that need every row it saw, reported after them."""
        ...


@dataclass(frozen=True)
class CheckSpec:
    """A recipe's checking declaration, picklable (module-level functions and classes pickle by
    reference): the pipeline streams each file's rows from `reader` to `checker(context)`."""

    reader: RowReader
    checker: Callable[[CheckContext], RowChecker]
    #: Every check name its findings use, in report order (`file`: an unreadable file; `schema`).
    check_names: tuple[str, ...]
    #: What the token recount counts, with its verb, for provenance messages ("prompt + answer recount").
    counted: str = "the row recounts"
    #: True: a file is checked by one checker, in this process, in row order (its checks span the file).
    whole_files: bool = False
    #: Rows whose ground truth is recoverable, rewritten (`--fix`); None: the recipe repairs nothing.
    fix_record: RecordFix | None = None
    #: File-level findings reported before a file's rows, once the tokenizer is chosen (e.g. counts not comparable).
    opening: Callable[[CheckContext], list[Finding]] | None = None
    #: How the shortcut probes read a row (`--shortcuts`); None: the recipe has none.
    probes: ProbeSpec | None = None
    #: The column holding the text sent: a row equal to an earlier row of its file, and a prompt equal
    #: to an earlier row's in any file checked with it, are findings. None: neither is checked.
    prompt_column: str | None = None

    def check(self, checker: RowChecker, context: CheckContext, record: dict[str, Any], row: int) -> RowResult:
        """`checker`'s result for one row, with the digests the duplicate checks compare and its
        shortcut probes when `context` asks for them (a row the checks reject is not probed: the
        report counts it)."""
        result = checker.check(record, row)
        if self.prompt_column is not None:
            digest, prompt_digest = row_digests(record, self.prompt_column)
            result = result.model_copy(update={"digest": digest, "prompt_digest": prompt_digest})
        if not context.probes or self.probes is None:
            return result
        if result.has_error:
            return result.model_copy(update={"probe": ProbeOutcome(skipped="a check rejected the row")})
        return result.model_copy(update={"probe": probe_record(self.probes, record)})
