"""The openai/mrcr parquet layout: exact columns, order and types."""

from __future__ import annotations

import array
import contextlib
import hashlib
import io
import itertools
import os
from collections.abc import Iterable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ._files import EarlyWriteback, atomic_path


def use_lean_memory_pool() -> None:
    """Arrow's jemalloc pool, where pyarrow has one, for reading rows of megabytes: with the
    default (mimalloc) one 60 MB row group read in small batches left about 90 MB resident,
    with jemalloc about 30 MB. Processes started later (workers) take it from their environment
    from their first allocation on, unless the user chose a pool there. Not for writing: the
    generator ran a third slower with it (10.1 s against 7.4 s for 32 rows of the 1M bin)."""
    try:
        pool = pa.jemalloc_memory_pool()
    except NotImplementedError:  # a pyarrow built without jemalloc
        return
    if "ARROW_DEFAULT_MEMORY_POOL" not in os.environ:
        os.environ["ARROW_DEFAULT_MEMORY_POOL"] = "jemalloc"
        pa.set_memory_pool(pool)


#: Row groups are cut before they would decode to more than this, so that a reader holding one
#: row group (pandas, datasets, a column chunk read whole) stays small; a longer row is a group alone.
ROW_GROUP_BYTES = 64 << 20


def row_bytes(table: pa.Table) -> list[int]:
    """Decoded bytes of each row: string data plus offsets, 8 bytes per integer."""
    sizes = np.zeros(table.num_rows, np.int64)
    for column, field in zip(table.columns, table.schema, strict=True):
        sizes += _value_bytes(column) + 4 if _is_text(field) else 8
    return sizes.tolist()


def _value_bytes(column: pa.ChunkedArray) -> np.ndarray:
    """Bytes of each value of a string or binary column (0 for a null), read from its offsets:
    pyarrow.compute would do it too, but its first call costs a third of a second or more."""
    parts = [np.zeros(0, np.int64)]
    for chunk in column.chunks:
        if len(chunk) == 0:
            continue
        large = pa.types.is_large_string(chunk.type) or pa.types.is_large_binary(chunk.type)
        offsets = np.frombuffer(chunk.buffers()[1], np.int64 if large else np.int32)
        lengths = np.diff(offsets[chunk.offset : chunk.offset + len(chunk) + 1]).astype(np.int64)
        if chunk.null_count:
            valid = np.unpackbits(np.frombuffer(chunk.buffers()[0], np.uint8), bitorder="little")
            lengths *= valid[chunk.offset : chunk.offset + len(chunk)]
        parts.append(lengths)
    return np.concatenate(parts)


def text_array(values: Sequence[str], kind: pa.DataType = pa.string()) -> pa.Array:
    """`pa.array(values, kind)` for strings (no nulls) and a string type, built in buffers of exactly
    the size it needs. pyarrow's own builder grows its buffers by doubling and took 177 MB of fresh
    memory for a 64 MB batch of 1M-bin rows, 0.2 to 0.6 s a batch on a virtual machine (where fresh
    pages are dear), against a few hundredths of a second this way."""
    # A lone surrogate fails here, as in pa.array.
    return encoded_text_array([value.encode("utf-8") for value in values], kind)


def encoded_text_array(encoded: Sequence[bytes], kind: pa.DataType = pa.string()) -> pa.Array:
    """`text_array` of strings already encoded as UTF-8 (a caller may drop each string once encoded)."""
    offsets = array.array("q", itertools.accumulate(map(len, encoded), initial=0))
    if not pa.types.is_large_string(kind):
        if offsets[-1] >= 2**31:  # past 32-bit offsets: pyarrow's builder knows what to do
            return pa.array([value.decode("utf-8") for value in encoded], kind)
        offsets = array.array("i", offsets)
    return pa.Array.from_buffers(kind, len(encoded), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))])


def int_array(values: Sequence[int]) -> pa.Array:
    """`pa.array(values, pa.int64())` for ints (no nulls), from their buffer: any `pa.array` call
    makes pyarrow import pandas (half a second, and its memory, in every generation worker)."""
    return pa.Array.from_buffers(pa.int64(), len(values), [None, pa.py_buffer(array.array("q", values))])


def _is_text(field: pa.Field) -> bool:
    return pa.types.is_string(field.type) or pa.types.is_large_string(field.type) or pa.types.is_binary(field.type)


class RowGroupWriter:
    """Rows added in order, written as one zstd parquet file that appears atomically on `close`.
    Its row groups hold the row counts `groups` when given (a generated file's, planned from its
    specs), else at most ROW_GROUP_BYTES decoded each. Either way they depend only on the rows,
    never on how they were split into the tables added, so the same rows give byte-identical files."""

    def __init__(
        self,
        path: str | os.PathLike,
        schema: pa.Schema,
        digest: bool = False,
        groups: Sequence[int] | None = None,
        durable: bool = True,
    ) -> None:
        """`digest`: also hash the file's bytes as they are written (`sha256` once closed), for a
        sidecar sealed to it, instead of reading the file again after it is written. `durable`
        False: not fsynced (scratch, such as a part that `RowGroupFileJoin` joins)."""
        self._atomic = atomic_path(path, durable=durable)
        tmp = self._atomic.__enter__()
        self._sink = _HashingFile(tmp) if digest else None
        #: The sha256 of the file, once closed, when asked for (`digest`).
        self.sha256: str | None = None
        self._writer = pq.ParquetWriter(tmp if self._sink is None else self._sink, schema, **writer_properties(schema))
        self._groups = list(groups) if groups is not None else None
        self._pending: list[pa.Table] = []
        self._pending_bytes = 0
        self._pending_rows = 0

    def add(self, table: pa.Table) -> None:
        if self._groups is not None:
            self._add_planned(table)
            return
        start = 0
        for i, size in enumerate(row_bytes(table)):
            if self._pending_bytes + size > ROW_GROUP_BYTES and (self._pending or i > start):
                if i > start:
                    self._pending.append(table.slice(start, i - start))
                self._flush()
                start = i
            self._pending_bytes += size
        if table.num_rows > start:
            self._pending.append(table.slice(start))

    def _add_planned(self, table: pa.Table) -> None:
        """Add rows, writing each planned group once its rows are all here."""
        assert self._groups is not None
        start = 0
        while start < table.num_rows:
            if not self._groups:
                raise ValueError("more rows than the planned row groups hold")
            take = min(self._groups[0] - self._pending_rows, table.num_rows - start)
            self._pending.append(table.slice(start, take))
            self._pending_rows += take
            start += take
            if self._pending_rows == self._groups[0]:
                self._groups.pop(0)
                self._flush()

    def _flush(self) -> None:
        if self._pending:
            # One contiguous table: page breaks must not depend on where the input was split.
            group = pa.concat_tables(self._pending)
            if any(column.num_chunks > 1 for column in group.columns):
                group = group.combine_chunks()
            self._writer.write_table(group, row_group_size=group.num_rows)
            self._pending.clear()
            self._pending_bytes = self._pending_rows = 0

    def close(self) -> None:
        """Write what is pending and put the file in place."""
        try:
            if self._groups:
                raise ValueError(f"{len(self._groups)} planned row group(s) got no rows")
            self._flush()
            self._writer.close()
            if self._sink is not None:
                self._sink.close()
                self.sha256 = self._sink.digest.hexdigest()
        except BaseException as exc:
            self._atomic.__exit__(type(exc), exc, exc.__traceback__)
            raise
        self._atomic.__exit__(None, None, None)

    def abort(self) -> None:
        """Leave no file (nor any partial one)."""
        self._writer.close()
        if self._sink is not None:
            self._sink.close()
        error = RuntimeError("aborted")
        self._atomic.__exit__(RuntimeError, error, None)

    def __enter__(self) -> RowGroupWriter:
        return self

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        if kind is None:
            self.close()
        else:
            self.abort()


def writer_properties(schema: pa.Schema) -> dict:
    """How every parquet file we write is written (and each part that `RowGroupFileJoin` joins:
    parts joined byte for byte must be written alike).

    write_batch_size=1: a data page is closed as soon as it passes its 1 MB target, rather than
    after 1024 values (one page of gigabytes in the 1M bin), so readers stream a row group page by
    page instead of decompressing it whole. No statistics nor dictionary on text columns: min/max of
    megabyte prompts cost time and are dropped from the footer anyway, and a dictionary of unique
    megabyte values is hashed whole only to be abandoned. No page index: the join refuses it."""
    plain = [field.name for field in schema if not _is_text(field)]
    return {
        "compression": "zstd",
        "write_batch_size": 1,
        "write_statistics": plain,
        "use_dictionary": plain,
        "write_page_index": False,
    }


class _HashingFile(io.FileIO):
    """A file opened for writing that hashes (sha256) what is written to it."""

    def __init__(self, path: str | os.PathLike) -> None:
        super().__init__(path, "wb")
        self.digest = hashlib.sha256()

    def write(self, data) -> int:
        self.digest.update(data)
        return super().write(data)


def write_row_groups(tables: Iterable[pa.Table], path: str | os.PathLike, schema: pa.Schema) -> None:
    """Write the rows of `tables`, in order, as one parquet file, atomically (see RowGroupWriter)."""
    with RowGroupWriter(path, schema) as writer:
        for table in tables:
            writer.add(table)


def write_arrow_atomic(table: pa.Table, path: str | os.PathLike) -> None:
    """An uncompressed Arrow IPC file, atomically: scratch data that readers memory-map, not
    fsynced (see `atomic_path`; a reader of an earlier run's file checks it with `read_arrow_rows`)."""
    with (
        atomic_path(path, durable=False) as tmp,
        pa.OSFile(str(tmp), "wb") as sink,
        pa.ipc.new_file(sink, table.schema) as ipc,
    ):
        ipc.write_table(table)


def read_arrow(path: str | os.PathLike) -> pa.Table:
    """A file of `write_arrow_atomic`, memory-mapped (its pages are shared between processes)."""
    return pa.ipc.open_file(pa.memory_map(str(path))).read_all()


def parquet_rows(path: str | os.PathLike) -> int | None:
    """The rows of a parquet file, read from its footer; None when it is missing or not a whole
    file (a part cut short by a crash before its data reached the disk)."""
    try:
        return pq.ParquetFile(path).metadata.num_rows
    except (OSError, ValueError, pa.ArrowException):
        return None


class RowGroupFileJoin:
    """The parquet file `path`, from parts `RowGroupWriter` wrote (with the same schema), added in
    order as they are ready: their row groups' bytes copied under one footer, the bytes one writer
    would have written of the same groups (see `ParquetJoin`). It appears atomically on `close`,
    which returns its sha256, computed as it is written."""

    def __init__(self, path: str | os.PathLike) -> None:
        from ._parquet_join import ParquetJoin

        self._atomic = atomic_path(path)
        self._sink = _HashingFile(self._atomic.__enter__())
        self._join = ParquetJoin(self._sink)
        self._writeback = EarlyWriteback(self._sink.fileno())

    def add(self, part: str | os.PathLike) -> None:
        self._join.add(part)
        self._writeback.nudge()

    def close(self) -> str:
        try:
            self._join.close()
            self._writeback.wait()
            self._sink.close()
        except BaseException as exc:
            self.abort(exc)
            raise
        self._atomic.__exit__(None, None, None)
        return self._sink.digest.hexdigest()

    def abort(self, error: BaseException | None = None) -> None:
        """Leave no file (nor any partial one)."""
        with contextlib.suppress(OSError):  # a failed sync matters no more: the file goes
            self._writeback.wait()
        self._sink.close()
        error = error or RuntimeError("aborted")
        self._atomic.__exit__(type(error), error, None)


def read_arrow_rows(path: str | os.PathLike) -> int | None:
    """The rows of a file of `write_arrow_atomic`, read from its footer (its data stays unread);
    None when it is missing or not a whole file (a crash before the data reached the disk)."""
    try:
        with pa.memory_map(str(path)) as source:
            reader = pa.ipc.open_file(source)
            return sum(reader.get_batch(i).num_rows for i in range(reader.num_record_batches))
    except (OSError, pa.ArrowException):
        return None


def write_table_atomic(table: pa.Table, path: str | os.PathLike) -> None:
    """Write zstd parquet atomically in row groups of at most ROW_GROUP_BYTES; the same table
    gives byte-identical files."""
    write_row_groups([table], path, table.schema)


#: Decoded bytes of one record batch when streaming rows: a few rows in the 1M bin.
BATCH_BYTES = 8 << 20


def decoded_bytes(meta: pq.FileMetaData) -> int:
    """What a parquet file's rows take decoded, by its footer."""
    return sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))


def batch_rows(meta: pq.FileMetaData, batch_bytes: int = BATCH_BYTES) -> int:
    """Rows per record batch so that one batch decodes to about `batch_bytes`."""
    per_row = decoded_bytes(meta) / max(1, meta.num_rows)
    return max(1, min(1024, int(batch_bytes // max(1.0, per_row))))
