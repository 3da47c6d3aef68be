"""The openai/mrcr parquet layout: its columns, order and types, and rows written and read in it."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from ..._parquet import batch_rows, encoded_text_array, int_array, write_table_atomic
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
    """The rows as a table in the openai/mrcr schema (text and int64 columns, built from buffers).
    Each row's text is encoded as it comes: a row the iterable makes can be dropped at once (a
    chunk of the 1M bin holds tens of megabytes of prompts)."""
    texts = [pa.types.is_string(field.type) for field in MRCR_SCHEMA]
    values: list[list] = [[] for _ in MRCR_SCHEMA]
    for row in rows:
        for column, field, text in zip(values, MRCR_SCHEMA, texts, strict=True):
            value = getattr(row, field.name)
            column.append(value.encode("utf-8") if text else value)  # a lone surrogate fails as in pa.array
    columns = {
        field.name: encoded_text_array(column, field.type) if text else int_array(column)
        for column, field, text in zip(values, MRCR_SCHEMA, texts, strict=True)
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
