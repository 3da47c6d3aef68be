"""The openai/mrcr parquet layout: exact columns, order and types."""

from __future__ import annotations

import array
import itertools
import os
from collections.abc import Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc
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


#: Row groups are cut before they would decode to more than this, so that a reader holding one
#: row group (pandas, datasets, a column chunk read whole) stays small; a longer row is a group alone.
ROW_GROUP_BYTES = 64 << 20


def row_bytes(table: pa.Table) -> list[int]:
    """Decoded bytes of each row: string data plus offsets, 8 bytes per integer."""
    sizes = None
    for column, field in zip(table.columns, table.schema, strict=True):
        if pa.types.is_string(field.type) or pa.types.is_large_string(field.type) or pa.types.is_binary(field.type):
            part = pc.add(pc.fill_null(pc.binary_length(column), 0), 4)
        else:
            part = pa.array([8] * table.num_rows, pa.int64())
        sizes = part if sizes is None else pc.add(sizes, part)
    return [] if sizes is None else sizes.to_pylist()


def write_row_groups(tables: Iterable[pa.Table], path: str | os.PathLike, schema: pa.Schema = MRCR_SCHEMA) -> None:
    """Write the rows of `tables`, in order, as one zstd parquet file, atomically, in row groups of
    at most ROW_GROUP_BYTES decoded. The groups depend only on the rows, never on how they were
    split into tables, so the same rows give byte-identical files."""
    # write_batch_size=1: a data page is closed as soon as it passes its 1 MB target, rather than
    # after 1024 values (one page of gigabytes in the 1M bin), so readers stream a row group page
    # by page instead of decompressing it whole.
    with atomic_path(path) as tmp, pq.ParquetWriter(tmp, schema, compression="zstd", write_batch_size=1) as writer:
        pending: list[pa.Table] = []
        pending_bytes = 0

        def flush() -> None:
            nonlocal pending_bytes
            if pending:
                # One contiguous table: page breaks must not depend on where the input was split.
                group = pa.concat_tables(pending).combine_chunks()
                writer.write_table(group, row_group_size=group.num_rows)
                pending.clear()
                pending_bytes = 0

        for table in tables:
            start = 0
            for i, size in enumerate(row_bytes(table)):
                if pending_bytes + size > ROW_GROUP_BYTES and (pending or i > start):
                    if i > start:
                        pending.append(table.slice(start, i - start))
                    flush()
                    start = i
                pending_bytes += size
            if table.num_rows > start:
                pending.append(table.slice(start))
        flush()


def write_arrow_atomic(table: pa.Table, path: str | os.PathLike) -> None:
    """An uncompressed Arrow IPC file, atomically: scratch data that readers memory-map."""
    with atomic_path(path) as tmp, pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, table.schema) as ipc:
        ipc.write_table(table)


def read_arrow(path: str | os.PathLike) -> pa.Table:
    """A file of `write_arrow_atomic`, memory-mapped (its pages are shared between processes)."""
    return pa.ipc.open_file(pa.memory_map(str(path))).read_all()


def write_table_atomic(table: pa.Table, path: str | os.PathLike) -> None:
    """Write zstd parquet atomically in row groups of at most ROW_GROUP_BYTES; the same table
    gives byte-identical files."""
    write_row_groups([table], path, table.schema)


def write_rows(rows: Iterable[MrcrRow], path: str | os.PathLike) -> None:
    write_table_atomic(rows_to_table(rows), path)


#: Decoded bytes of one record batch when streaming rows: a few rows in the 1M bin.
BATCH_BYTES = 8 << 20


def decoded_bytes(meta: pq.FileMetaData) -> int:
    """What a parquet file's rows take decoded, by its footer."""
    return sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))


def batch_rows(meta: pq.FileMetaData, batch_bytes: int = BATCH_BYTES) -> int:
    """Rows per record batch so that one batch decodes to about `batch_bytes`."""
    per_row = decoded_bytes(meta) / max(1, meta.num_rows)
    return max(1, min(1024, int(batch_bytes // max(1.0, per_row))))


def iter_rows(path: str | os.PathLike, batch_size: int | None = None) -> Iterator[MrcrRow]:
    """Stream the rows of an MRCR parquet file without loading it (or a row group) whole."""
    with pq.ParquetFile(path, pre_buffer=False, buffer_size=1 << 20) as parquet:
        size = batch_size or batch_rows(parquet.metadata)
        for batch in parquet.iter_batches(batch_size=size, columns=list(MRCR_COLUMNS), use_threads=False):
            for record in batch.to_pylist():
                yield MrcrRow(**record)
