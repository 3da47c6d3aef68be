"""The openai/mrcr parquet layout: its columns, order and types, and rows written and read in it."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from ..._parquet import batch_rows, int_array, text_array, write_table_atomic
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


def rows_to_table(rows: Iterable[MrcrRow]) -> pa.Table:
    """The rows as a table in the openai/mrcr schema (text and int64 columns, built from buffers)."""
    rows = list(rows)
    columns = {
        field.name: text_array([getattr(row, field.name) for row in rows], field.type)
        if pa.types.is_string(field.type)
        else int_array([getattr(row, field.name) for row in rows])
        for field in MRCR_SCHEMA
    }
    return pa.table(columns, schema=MRCR_SCHEMA)


def write_rows(rows: Iterable[MrcrRow], path: str | os.PathLike) -> None:
    write_table_atomic(rows_to_table(rows), path)


def iter_rows(path: str | os.PathLike, batch_size: int | None = None) -> Iterator[MrcrRow]:
    """Stream the rows of an MRCR parquet file without loading it (or a row group) whole."""
    with pq.ParquetFile(path, pre_buffer=False, buffer_size=1 << 20) as parquet:
        size = batch_size or batch_rows(parquet.metadata)
        for batch in parquet.iter_batches(batch_size=size, columns=list(MRCR_COLUMNS), use_threads=False):
            for record in batch.to_pylist():
                yield MrcrRow(**record)
