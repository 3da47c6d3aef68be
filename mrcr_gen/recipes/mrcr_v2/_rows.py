"""MRCR v2 rows and their files: the upstream CSV layout, and parquet with the same columns."""

from __future__ import annotations

import array
import ast
import csv
import functools
import hashlib
import io
import itertools
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, TextIO

from pydantic import Field, model_validator

from ..._files import atomic_path
from ..._models import _Frozen
from ..._paths import raise_csv_limit

V2_COLUMNS: tuple[str, ...] = (
    "queries",
    "answer",
    "context_len",
    "answer_token_count",
    "view_ops",
    "num_relevant",
    "answer_context_position",
    "index_positions_of_seeds",
    "relevant_context_positions",
)
if TYPE_CHECKING:  # pyarrow loads for parquet files (V2_SCHEMA, `v2_schema`), not for CSV ones
    import pyarrow as pa

    V2_SCHEMA: pa.Schema


@functools.cache
def v2_schema() -> pa.Schema:
    """The parquet schema of a v2 file: the upstream columns, typed (also `V2_SCHEMA`)."""
    import pyarrow as pa

    return pa.schema(
        [
            ("queries", pa.string()),
            ("answer", pa.string()),
            ("context_len", pa.int64()),
            ("answer_token_count", pa.int64()),
            ("view_ops", pa.string()),
            ("num_relevant", pa.int64()),
            ("answer_context_position", pa.list_(pa.int64())),
            ("index_positions_of_seeds", pa.list_(pa.int64())),
            ("relevant_context_positions", pa.list_(pa.list_(pa.int64()))),
        ]
    )


def __getattr__(name: str) -> Any:
    if name == "V2_SCHEMA":  # built when first asked for: importing pyarrow takes ~0.1 s
        return v2_schema()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


POSITION_COLUMNS = ("answer_context_position", "index_positions_of_seeds", "relevant_context_positions")
INT_COLUMNS = ("context_len", "answer_token_count", "num_relevant")
#: A parquet row group holds about this many bytes of text (8M-token rows are ~35 MB each).
ROW_GROUP_BYTES = 64 << 20
#: Bytes written to a CSV file hashed together (see `_DigestingFile`).
DIGEST_PIECE = 1 << 20
FORMATS = ("csv", "parquet")


class V2Row(_Frozen):
    """One MRCR v2 row, in the upstream column order.

    Positions: `index_positions_of_seeds` are the 0-based turn indices (after the few-shot block)
    of the key's n turns; `relevant_context_positions` their [start, end) token spans in the
    tokenized `queries` (from the turn's "User:" to the end of its closing blank line);
    `answer_context_position` the span of the ordinal-th one.
    """

    queries: str
    answer: str
    context_len: int = Field(ge=0)
    answer_token_count: int = Field(ge=0)
    view_ops: str
    num_relevant: int = Field(ge=1, le=8)
    answer_context_position: tuple[int, int]
    index_positions_of_seeds: tuple[int, ...]
    relevant_context_positions: tuple[tuple[int, int], ...]

    @model_validator(mode="after")
    def _consistent(self) -> V2Row:
        if not self.queries.endswith(self.view_ops):
            raise ValueError("view_ops must be the tail of queries")
        if (
            len(self.index_positions_of_seeds) != self.num_relevant
            or len(self.relevant_context_positions) != self.num_relevant
        ):
            raise ValueError("one position per relevant turn")
        if self.answer_context_position not in self.relevant_context_positions:
            raise ValueError("answer_context_position must be one of relevant_context_positions")
        return self

    def record(self) -> dict[str, Any]:
        return {
            **self.model_dump(),
            "answer_context_position": list(self.answer_context_position),
            "index_positions_of_seeds": list(self.index_positions_of_seeds),
            "relevant_context_positions": [list(p) for p in self.relevant_context_positions],
        }


# --- reading -----------------------------------------------------------------------------------


def parse_positions(value: Any) -> Any:
    """A position cell as tuples: CSV holds Python reprs like "(12, 80)" or "[(1, 2), (3, 4)]",
    parquet holds lists. ValueError for anything else."""
    if isinstance(value, str):
        try:
            value = ast.literal_eval(value)
        except (ValueError, SyntaxError) as exc:
            raise ValueError(f"not a literal: {value[:40]!r}") from exc
    if isinstance(value, (list, tuple)):
        return tuple(parse_positions(v) if isinstance(v, (list, tuple)) else v for v in value)
    raise ValueError(f"expected a list or tuple, got {type(value).__name__}")


def _plain_csv_record(text: str) -> list[str] | None:
    """The cells of one CSV record (its lines joined) as `csv.reader` reads them, when the record is
    plain: cells unquoted without quotes or line breaks, or quoted with doubled quotes inside, then a
    comma or the record's end, then "\n" or "\r\n". None for anything else (an empty line, text after a
    closing quote, a lone "\r", NUL, ...): left to the csv module."""
    end = len(text) - (2 if text.endswith("\r\n") else 1 if text.endswith("\n") else 0)
    if end == 0 or "\0" in text:
        return None
    cells: list[str] = []
    at = 0
    while True:
        if text.startswith('"', at):
            pieces, start = [], at + 1
            while True:
                close = text.find('"', start, end)
                if close < 0:
                    return None
                if close + 1 < end and text[close + 1] == '"':
                    pieces.append(text[start : close + 1])  # a doubled quote: one quote
                    start = close + 2
                    continue
                pieces.append(text[start:close])
                at = close + 1
                break
            cells.append("".join(pieces))
        else:
            comma = text.find(",", at, end)
            stop = end if comma < 0 else comma
            cell = text[at:stop]
            if '"' in cell or "\r" in cell or "\n" in cell:
                return None
            cells.append(cell)
            at = stop
        if at == end:
            return cells
        if text[at] != ",":
            return None
        at += 1


class _CsvRows:
    """`csv.reader(handle)`'s rows, read ~10x faster: the file is read in blocks, a record's end found
    with `str.find` (the first line break outside quotes), and a plain record (`_plain_csv_record`) cut
    without the csv module's loop over every character (~40 MB/s: seconds for rows of 1M tokens).
    From the first record that is not plain on, the csv module reads the rest, so every file reads as
    with it."""

    def __init__(self, handle: TextIO, block: int = 1 << 20) -> None:
        self._handle = handle
        self._block = block
        self._buffer = ""
        self._at = 0  # where the next record starts in the buffer
        self._csv: Iterator[list[str]] | None = None
        self.line_num = 0  # what csv.DictReader reads after each row

    def __iter__(self) -> _CsvRows:
        return self

    def _read_more(self) -> bool:
        """The rest of the buffer and the next block (at least as long: reads double); False at the end."""
        more = self._handle.read(max(self._block, len(self._buffer) - self._at))
        if not more:
            return False
        self._buffer = self._buffer[self._at :] + more
        self._at = 0
        return True

    def _next_record(self) -> tuple[int, int] | None:
        """(start, end) in the buffer of the next record: up to its first line break outside quotes,
        or to the end of the file; None when nothing is left."""
        scanned, inside = 0, False  # from self._at, which _read_more moves
        while True:
            buffer, start = self._buffer, self._at
            at = start + scanned
            if inside:
                quote = buffer.find('"', at)
                if quote >= 0:
                    scanned, inside = quote + 1 - start, False
                    continue
            else:
                newline = buffer.find("\n", at)
                quote = buffer.find('"', at, len(buffer) if newline < 0 else newline)
                if quote >= 0:
                    scanned, inside = quote + 1 - start, True
                    continue
                if newline >= 0:
                    self._at = newline + 1
                    return start, newline + 1
            scanned = len(buffer) - start
            if not self._read_more():
                self._at = len(buffer)
                return (start, len(buffer)) if start < len(buffer) else None

    def _lines_from(self, start: int) -> Iterator[str]:
        """The file's lines from `start` in the buffer on, split as iterating the file splits them."""
        tail = self._buffer[start:]
        # Complete the buffer's last line from the file; stop only at a "\n" (or the end): a "\r" may be
        # the first half of a "\r\n" the block cut.
        while tail and not tail.endswith("\n"):
            more = self._handle.readline()
            if not more:
                break
            tail += more
        self._buffer, self._at = "", 0
        return itertools.chain(io.StringIO(tail, newline=""), self._handle)

    def __next__(self) -> list[str]:
        if self._csv is None:
            found = self._next_record()
            if found is None:
                raise StopIteration
            start, end = found
            self.line_num += 1
            cells = _plain_csv_record(self._buffer[start:end])
            if cells is not None:
                return cells
            self._csv = csv.reader(self._lines_from(start))
        return next(self._csv)


class _CsvDictReader(csv.DictReader):
    """csv.DictReader over `_CsvRows`."""

    def __init__(self, handle: TextIO) -> None:
        super().__init__(handle)
        self.reader = _CsvRows(handle)  # type: ignore[assignment]


def iter_records(path: str | os.PathLike, errors: str = "strict") -> Iterator[dict[str, Any]]:
    """Raw records of a v2 file (CSV cells are strings; parquet cells typed), one at a time.
    `errors` is how CSV bytes that are not UTF-8 decode (the validator reads them as lone
    surrogates with "surrogateescape", to report them by row)."""
    path = Path(path)
    if path.suffix.lower() == ".csv":
        raise_csv_limit()
        with open(path, newline="", encoding="utf-8-sig", errors=errors) as handle:  # a byte-order mark is not a column
            yield from _CsvDictReader(handle)
        return
    import pyarrow.parquet as pq

    with pq.ParquetFile(path) as parquet:
        for batch in parquet.iter_batches(batch_size=4):
            yield from batch.to_pylist()


def coerce_record(record: dict[str, Any]) -> dict[str, Any]:
    """A raw record with integer and position cells parsed (ValueError naming the column)."""
    out = dict(record)
    for name in INT_COLUMNS:
        if name in out and isinstance(out[name], str):
            try:
                out[name] = int(out[name])
            except ValueError:
                raise ValueError(f"{name}: not an integer: {out[name][:40]!r}") from None
    for name in POSITION_COLUMNS:
        if name in out:
            try:
                out[name] = parse_positions(out[name])
            except ValueError as exc:
                raise ValueError(f"{name}: {exc}") from None
    return out


def iter_v2_rows(path: str | os.PathLike) -> Iterator[V2Row]:
    for record in iter_records(path):
        yield V2Row(**coerce_record(record))


# --- writing -----------------------------------------------------------------------------------


def _csv_cell(name: str, value: Any) -> Any:
    if name == "answer_context_position":
        return repr(tuple(value))
    if name == "index_positions_of_seeds":
        return repr(list(value))
    if name == "relevant_context_positions":
        return repr([tuple(p) for p in value])
    return value


def _quoted_csv_cell(text: str) -> str | None:
    """`text` as the csv module writes a cell holding a line break (its default dialect quotes it
    and doubles every quote character), or None for a cell left to the csv module. One
    `str.replace` instead of the module's character-by-character loop: ~20x faster on a `queries`
    cell of millions of characters."""
    if "\n" not in text or "\0" in text:  # NUL: whatever the csv module of this Python does with it
        return None
    return '"' + text.replace('"', '""') + '"'


def _column(values: list[Any], kind: pa.DataType) -> pa.Array:
    """`pa.array(values, kind)` for a v2 column (text, ints, lists of ints, lists of lists of ints;
    no nulls), built from buffers: any `pa.array` call makes pyarrow import pandas (half a second of
    a parquet generation, see `mrcr_gen._parquet.int_array`)."""
    import pyarrow as pa

    from ..._parquet import int_array, text_array

    if pa.types.is_string(kind):
        return text_array(values, kind)
    if pa.types.is_integer(kind):
        return int_array(values)
    offsets = array.array("i", itertools.accumulate(map(len, values), initial=0))
    child = _column([item for value in values for item in value], kind.value_type)
    return pa.Array.from_buffers(kind, len(values), [None, pa.py_buffer(offsets)], children=[child])


class _DigestingFile:
    """A binary file whose sha256 is computed as it is written, on a thread of its own (hashlib
    lets go of the GIL): the sidecar's seal needs it, and reading a file of 1M-token rows back to
    hash it took a tenth of a second after the last row. Small writes are hashed in pieces of at
    least `piece` bytes (DIGEST_PIECE), in the order they were written."""

    def __init__(self, raw: BinaryIO, piece: int | None = None) -> None:
        self.raw = raw
        self._piece = DIGEST_PIECE if piece is None else piece
        self._digest = hashlib.sha256()
        self._hashing = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mrcr-v2 sha256")
        self._held: list[bytes] = []
        self._held_bytes = 0

    def write(self, data: bytes) -> int:
        written = self.raw.write(data)
        if len(data) >= self._piece:  # hashed as it is, never copied into a piece (a transcript's megabytes)
            self._hash_held()
            self._hashing.submit(self._digest.update, data)
            return written
        self._held.append(data)
        self._held_bytes += len(data)
        if self._held_bytes >= self._piece:
            self._hash_held()
        return written

    def _hash_held(self) -> None:
        if self._held:
            self._hashing.submit(self._digest.update, b"".join(self._held))
            self._held, self._held_bytes = [], 0

    def close(self) -> str:
        """Close the file; its sha256."""
        try:
            self.raw.close()
            self._hash_held()
        finally:
            self._hashing.shutdown(wait=True)
        return self._digest.hexdigest()

    def abort(self) -> None:
        try:
            self.raw.close()
        finally:
            self._hashing.shutdown(wait=False, cancel_futures=True)


class _Utf8Lines:
    """What the csv module writes to, for a file opened in binary: each line encoded as UTF-8 (the
    bytes a text file opened with `encoding="utf-8", newline=""` would write)."""

    def __init__(self, raw: BinaryIO | _DigestingFile) -> None:
        self.raw = raw

    def write(self, text: str) -> int:
        return self.raw.write(text.encode("utf-8"))


class V2FileWriter:
    """Streams rows into a CSV or parquet file that appears atomically when closed without error."""

    def __init__(
        self, path: str | os.PathLike, format: str = "csv", metadata: dict[bytes, bytes] | None = None
    ) -> None:
        """`metadata`: parquet key-value metadata (e.g. the recipe that generated the file)."""
        if format not in FORMATS:
            raise ValueError(f"format must be one of {FORMATS}, got {format!r}")
        self.path = Path(path)
        self.format = format
        self.rows = 0
        self._atomic = atomic_path(self.path)
        self._tmp = self._atomic.__enter__()
        self._buffer: list[dict[str, Any]] = []
        self._buffered_bytes = 0
        #: The last transcript (a `queries` cell without its `view_ops`) and its quoted cell's bytes.
        self._shared: tuple[str, bytes] | None = None
        #: The file's sha256 once closed, when computed as it was written (CSV; None for parquet).
        self.sha256: str | None = None
        try:
            if format == "csv":
                self._handle = _DigestingFile(open(self._tmp, "wb"))  # noqa: SIM115 - closed in close()
                self._csv = csv.writer(_Utf8Lines(self._handle))
                self._csv.writerow(V2_COLUMNS)
            else:
                import pyarrow.parquet as pq

                schema = v2_schema().with_metadata(metadata) if metadata else v2_schema()
                self._parquet = pq.ParquetWriter(self._tmp, schema, compression="zstd")
        except BaseException as exc:
            if isinstance(getattr(self, "_handle", None), _DigestingFile):
                self._handle.abort()
            self._atomic.__exit__(type(exc), exc, exc.__traceback__)  # removes the temporary file
            raise

    def write(self, row: V2Row | dict[str, Any]) -> None:
        record = row.record() if isinstance(row, V2Row) else row
        self.rows += 1
        if self.format == "csv":
            cells = [_csv_cell(name, record[name]) for name in V2_COLUMNS]
            if not self._write_queries(cells[0], record["view_ops"]):
                self._csv.writerow(cells)
            else:  # the same bytes: the first cell and its delimiter written, then the rest of the row
                self._csv.writerow(cells[1:])
            return
        self._buffer.append(record)
        self._buffered_bytes += len(record["queries"])
        if self._buffered_bytes >= ROW_GROUP_BYTES:
            self._flush()

    def _write_queries(self, queries: Any, view_ops: Any) -> bool:
        """Write the `queries` cell and its delimiter as the csv module would (`_quoted_csv_cell`);
        False, writing nothing, for a cell left to the csv module. Rows of one transcript share all
        of `queries` but their `view_ops`: that part is quoted and encoded once, for the first."""
        if not (isinstance(queries, str) and isinstance(view_ops, str) and queries.endswith(view_ops)):
            return False
        cut = len(queries) - len(view_ops)
        if self._shared is None or len(self._shared[0]) != cut or not queries.startswith(self._shared[0]):
            text = queries[:cut]
            quoted = _quoted_csv_cell(text)
            self._shared = None if quoted is None else (text, quoted[:-1].encode("utf-8"))
        tail = _quoted_csv_cell("\n" + view_ops)  # (the line break only makes it quoted)
        if self._shared is None or tail is None:
            return False
        self._handle.write(self._shared[1])
        self._handle.write((tail[2:] + ",").encode("utf-8"))
        return True

    def _flush(self) -> None:
        if not self._buffer:
            return
        import pyarrow as pa

        schema = v2_schema()
        columns = {field.name: _column([r[field.name] for r in self._buffer], field.type) for field in schema}
        self._parquet.write_table(pa.table(columns, schema=schema))
        self._buffer, self._buffered_bytes = [], 0

    def close(self, error: BaseException | None = None) -> None:
        try:
            if self.format == "csv" and error is None:
                self.sha256 = self._handle.close()
            elif self.format == "csv":
                self._handle.abort()
            else:
                if error is None:
                    self._flush()
                self._parquet.close()
        finally:
            if error is None:
                self._atomic.__exit__(None, None, None)
            else:
                self._atomic.__exit__(type(error), error, error.__traceback__)

    def __enter__(self) -> V2FileWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close(exc)
