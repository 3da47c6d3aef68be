"""The openai/mrcr parquet layout: exact columns, order and types."""

from __future__ import annotations

import array
import itertools
import os
from collections.abc import Iterable, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from ._files import atomic_path
from ._models import MrcrRow

MRCR_SCHEMA = pa.schema(
    [
        ("prompt", pa.string()),
        ("answer", pa.string()),
        ("random_string_to_prepend", pa.string()),
        ("n_needles", pa.int64()),
        ("desired_msg_index", pa.int64()),
        ("total_messages", pa.int64()),
        ("n_chars", pa.int64()),
        ("date_added", pa.string()),
    ]
)
MRCR_COLUMNS: tuple[str, ...] = tuple(MRCR_SCHEMA.names)


def _string_array(values: list[str]) -> pa.Array:
    """A string column built from its UTF-8 buffers: several times faster than `pa.array` for
    prompts of megabytes (which pyarrow would convert and re-check character by character)."""
    encoded = [value.encode("utf-8") for value in values]
    offsets = [0, *itertools.accumulate(map(len, encoded))]
    if offsets[-1] >= 2**31:
        return pa.array(values, pa.string())
    return pa.StringArray.from_buffers(
        len(values), pa.py_buffer(array.array("i", offsets)), pa.py_buffer(b"".join(encoded))
    )


def rows_to_table(rows: Iterable[MrcrRow]) -> pa.Table:
    rows = list(rows)
    columns = {}
    for field in MRCR_SCHEMA:
        values = [getattr(row, field.name) for row in rows]
        columns[field.name] = _string_array(values) if field.type == pa.string() else pa.array(values, field.type)
    return pa.table(columns, schema=MRCR_SCHEMA)


def write_table_atomic(table: pa.Table, path: str | os.PathLike) -> None:
    """Write zstd parquet atomically; the same table gives byte-identical files."""
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd")


def write_rows(rows: Iterable[MrcrRow], path: str | os.PathLike) -> None:
    write_table_atomic(rows_to_table(rows), path)


def iter_rows(path: str | os.PathLike, batch_size: int = 64) -> Iterator[MrcrRow]:
    """Stream the rows of an MRCR parquet file without loading it whole."""
    with pq.ParquetFile(path) as parquet:
        for batch in parquet.iter_batches(batch_size=batch_size, columns=list(MRCR_COLUMNS)):
            for record in batch.to_pylist():
                yield MrcrRow(**record)
