"""Parquet files with a fixed schema, as the validation pipeline reads and writes them: the footer's
schema checked against the recipe's, rows read by row range in small record batches (memory stays
flat however large the file or its row groups are), outputs written with the input's schema."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from .._files import atomic_path
from .._parquet import batch_rows
from ._findings import Finding, Severity, one_line
from ._spec import FileScan

#: Target decoded size of one record batch. Rows hold up to ~4 MB of prompt each, so this is
#: a few rows: memory stays flat however large the file is.
BATCH_BYTES = 8 << 20


def file_error(file: str, message: str) -> Finding:
    return Finding(file=file, row=None, check="file", severity="error", message=message)


def _schema_finding(file: str, message: str, severity: Severity = "error") -> Finding:
    return Finding(file=file, row=None, check="schema", severity=severity, message=message)


def check_schema(
    schema: pa.Schema, file: str, expected: pa.Schema, int_columns: frozenset[str]
) -> tuple[list[Finding], set[str]]:
    """File-level `schema` findings against `expected`, and the columns rows cannot use (missing or
    wrongly typed); any integer type is acceptable (a warning) in `int_columns`, any string type elsewhere."""
    findings: list[Finding] = []
    unusable: set[str] = set()
    names = set(schema.names)
    for field in expected:
        if field.name not in names:
            findings.append(_schema_finding(file, f"column {field.name!r} is missing"))
            unusable.add(field.name)
            continue
        actual = schema.field(field.name).type
        if actual == field.type:
            continue
        if field.name in int_columns:
            acceptable = pa.types.is_integer(actual)
        else:
            acceptable = pa.types.is_string(actual) or pa.types.is_large_string(actual)
        if not acceptable:
            unusable.add(field.name)
        message = f"column {field.name!r} has type {actual}, expected {field.type}"
        findings.append(_schema_finding(file, message, "warning" if acceptable else "error"))
    for name in schema.names:
        if name not in expected.names:
            findings.append(_schema_finding(file, f"extra column {name!r}", "warning"))
    return findings, unusable


def read_range(
    path: str | os.PathLike, first: int = 0, count: int | None = None, *, columns: list[str] | None = None
) -> Iterator[pa.RecordBatch]:
    """Rows `first` .. `first + count` of a parquet file in small record batches (about
    BATCH_BYTES decoded each), reading only the row groups that hold them: memory stays flat
    however large the file or its row groups are."""
    with pq.ParquetFile(path, pre_buffer=False, buffer_size=1 << 20) as parquet:
        meta = parquet.metadata
        end = meta.num_rows if count is None else min(meta.num_rows, first + count)
        groups, position, row = [], None, 0
        for g in range(meta.num_row_groups):
            n = meta.row_group(g).num_rows
            if row + n > first and row < end and n:
                position = row if position is None else position
                groups.append(g)
            row += n
        if position is None:
            return
        batches = parquet.iter_batches(
            batch_size=batch_rows(parquet.metadata, BATCH_BYTES), row_groups=groups, columns=columns, use_threads=False
        )
        for batch in batches:
            lo, hi = max(first - position, 0), min(end - position, batch.num_rows)
            if hi > lo:
                yield batch if (lo, hi) == (0, batch.num_rows) else batch.slice(lo, hi - lo)
            position += batch.num_rows
            if position >= end:
                return


class ParquetOutput:
    """A parquet file written with the input's schema; it appears atomically when the block exits cleanly."""

    def __init__(self, target: Path, schema: pa.Schema) -> None:
        self.target = target
        self.schema = schema
        self._stack = ExitStack()

    def __enter__(self) -> ParquetOutput:
        with ExitStack() as stack:
            tmp = stack.enter_context(atomic_path(self.target))
            self._writer = pq.ParquetWriter(tmp, self.schema, compression="zstd")
            stack.callback(self._writer.close)
            self._stack = stack.pop_all()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stack.__exit__(*exc)

    def write_batch(self, batch: pa.RecordBatch) -> None:
        self._writer.write_batch(batch.cast(self.schema) if batch.schema != self.schema else batch)

    def write_records(self, records: list[dict[str, Any]]) -> None:
        if records:
            self._writer.write_batch(pa.RecordBatch.from_pylist(records, schema=self.schema))


@dataclass(frozen=True)
class ParquetRows:
    """A recipe's parquet layout: `schema` (the expected columns, in order, with their types) and the
    columns where any integer type is acceptable (a warning, not an error)."""

    schema: pa.Schema
    int_columns: frozenset[str] = frozenset()

    def open(self, path: Path, file: str) -> FileScan:
        """The footer: schema findings and row count, no data read."""
        scan = FileScan(file=file)
        try:
            if path.stat().st_size == 0:
                scan.file_findings.append(file_error(file, "file is empty (0 bytes), not a parquet file"))
                return scan
            with pq.ParquetFile(path) as parquet:
                scan.schema = parquet.schema_arrow
                scan.num_rows = parquet.metadata.num_rows
                scan.metadata = parquet.metadata
        except Exception as exc:  # pyarrow raises ArrowInvalid, OSError, ... on bad input
            scan.file_findings.append(file_error(file, f"cannot read as parquet: {one_line(exc)}"))
            return scan
        findings, scan.unusable_columns = check_schema(scan.schema, file, self.schema, self.int_columns)
        scan.file_findings.extend(findings)
        scan.columns = [c for c in self.schema.names if c in scan.schema.names]
        scan.readable = True
        return scan

    def read(
        self, path: Path, first: int = 0, count: int | None = None, columns: list[str] | None = None
    ) -> Iterator[pa.RecordBatch]:
        return read_range(path, first, count, columns=columns)

    def writer(self, target: Path, scan: FileScan) -> ParquetOutput:
        assert scan.schema is not None  # only a readable file is written
        return ParquetOutput(target, scan.schema)
