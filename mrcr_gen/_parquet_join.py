"""Join parquet files at the byte level: the row groups of several parquet files, in order, as one
parquet file, without decoding or recompressing a page.

A parquet file is b"PAR1", the column chunks' pages, a footer (the Thrift FileMetaData in the
compact protocol), the footer's length and b"PAR1" again. Pages hold no file offsets: only the
footer does. So a file one writer would have written of many row groups is the parts' bodies
(bytes [4, footer start) of each) one after the other, and a footer whose row groups are the
parts' own, their offsets moved by where each body now starts. Workers compress their parts in
parallel; the join is a byte copy and a small footer, instead of a decode and a recompression in
one process.

Field ids are parquet-format's (src/main/thrift/parquet.thrift).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO, NamedTuple

MAGIC = b"PAR1"
#: The bodies are copied through one buffer of this size, whatever the parts' sizes.
COPY_BUFFER_BYTES = 4 << 20

# Thrift compact protocol types. A bool field carries its value in its type (TRUE or FALSE);
# decoded, it is a Field of type BOOL (= TRUE) and a Python bool.
BOOL = TRUE = 1
FALSE = 2
BYTE, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT = range(3, 13)
#: Deeper nesting (structs and containers) than this is refused: no parquet footer comes near
#: it, and a damaged one would otherwise reach Python's recursion limit.
MAX_DEPTH = 64


class Field(NamedTuple):
    """One field of a decoded struct, in the order it was written."""

    id: int
    type: int
    value: Any


class ThriftList(NamedTuple):
    """A decoded list or set: its elements' type and the elements."""

    element_type: int
    items: list[Any]


class ThriftMap(NamedTuple):
    """A decoded map: its keys' and values' types and the (key, value) pairs, in order."""

    key_type: int
    value_type: int
    items: list[tuple[Any, Any]]


class _Reader:
    """The compact protocol's values read from bytes; every read past the end is a ValueError."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, size: int) -> bytes:
        if size < 0 or self.pos + size > len(self.data):
            raise ValueError(f"Thrift data ends early (at byte {self.pos} of {len(self.data)})")
        chunk = self.data[self.pos : self.pos + size]
        self.pos += size
        return chunk

    def byte(self) -> int:
        pos = self.pos
        if pos >= len(self.data):
            raise ValueError(f"Thrift data ends early (at byte {pos} of {len(self.data)})")
        self.pos = pos + 1
        return self.data[pos]

    def varint(self) -> int:
        value = shift = 0
        while True:
            byte = self.byte()
            if byte < 0x80:
                return value | byte << shift
            value |= (byte & 0x7F) << shift
            shift += 7
            if shift > 63:
                raise ValueError(f"Thrift varint longer than 10 bytes at byte {self.pos}")

    def zigzag(self) -> int:
        value = self.varint()
        return (value >> 1) ^ -(value & 1)

    def size(self) -> int:
        """A container's size: each element takes at least one byte, so a size past the end is
        refused before anything is allocated for it."""
        size = self.varint()
        if size > len(self.data) - self.pos:
            raise ValueError(f"Thrift container of {size} elements in {len(self.data) - self.pos} bytes")
        return size


def decode_struct(data: bytes) -> list[Field]:
    """The fields of the compact-protocol struct that `data` holds, whole (trailing bytes are an
    error). `encode_struct` of the result gives `data` back when `data` is in the form Apache
    Thrift's writers produce (shortest varints, short field and list headers where they fit)."""
    reader = _Reader(data)
    fields = _read_struct(reader, 0)
    if reader.pos != len(data):
        raise ValueError(f"{len(data) - reader.pos} bytes after the Thrift struct")
    return fields


def _read_struct(reader: _Reader, depth: int) -> list[Field]:
    fields: list[Field] = []
    last = 0
    while True:
        header = reader.byte()
        if header == 0:
            return fields
        kind, delta = header & 0x0F, header >> 4
        field_id = last + delta if delta else reader.zigzag()
        if kind in (TRUE, FALSE):
            fields.append(Field(field_id, BOOL, kind == TRUE))
        else:
            fields.append(Field(field_id, kind, _read_value(reader, kind, depth)))
        last = field_id


def _read_value(reader: _Reader, kind: int, depth: int) -> Any:
    if kind in (I16, I32, I64):  # the most frequent, first
        return reader.zigzag()
    if depth > MAX_DEPTH:
        raise ValueError(f"Thrift values nested deeper than {MAX_DEPTH}")
    if kind in (TRUE, FALSE):  # an element of a container: one byte, 1 true, 2 false
        value = reader.byte()
        if value not in (TRUE, FALSE):
            raise ValueError(f"Thrift bool element {value} (1 or 2 expected)")
        return value == TRUE
    if kind == BYTE:
        return struct.unpack("<b", reader.take(1))[0]
    if kind == DOUBLE:
        return struct.unpack("<d", reader.take(8))[0]
    if kind == BINARY:
        return reader.take(reader.varint())
    if kind in (LIST, SET):
        header = reader.byte()
        size = header >> 4 if header >> 4 != 15 else reader.size()
        element = header & 0x0F
        return ThriftList(element, [_read_value(reader, element, depth + 1) for _ in range(size)])
    if kind == MAP:
        size = reader.size()
        if size == 0:
            return ThriftMap(0, 0, [])
        types = reader.byte()
        key, value = types >> 4, types & 0x0F
        items = [(_read_value(reader, key, depth + 1), _read_value(reader, value, depth + 1)) for _ in range(size)]
        return ThriftMap(key, value, items)
    if kind == STRUCT:
        return _read_struct(reader, depth + 1)
    raise ValueError(f"unknown Thrift compact type {kind}")


def encode_struct(fields: Sequence[Field]) -> bytes:
    """The compact-protocol bytes of a struct of `fields`, written in their order, as Apache
    Thrift's writers write them."""
    out = bytearray()
    _write_struct(out, fields)
    return bytes(out)


def _varint(out: bytearray, value: int) -> None:
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)


def _zigzag(out: bytearray, value: int) -> None:
    _varint(out, value * 2 if value >= 0 else -value * 2 - 1)


def _write_struct(out: bytearray, fields: Sequence[Field]) -> None:
    last = 0
    for field in fields:
        kind = (TRUE if field.value else FALSE) if field.type == BOOL else field.type
        if 0 < field.id - last <= 15:
            out.append((field.id - last) << 4 | kind)
        else:
            out.append(kind)
            _zigzag(out, field.id)
        if field.type != BOOL:
            _write_value(out, field.type, field.value)
        last = field.id
    out.append(0)


def _write_value(out: bytearray, kind: int, value: Any) -> None:
    if kind in (I16, I32, I64):  # the most frequent, first
        _zigzag(out, value)
    elif kind in (TRUE, FALSE):
        out.append(TRUE if value else FALSE)
    elif kind == BYTE:
        out += struct.pack("<b", value)
    elif kind == DOUBLE:
        out += struct.pack("<d", value)
    elif kind == BINARY:
        _varint(out, len(value))
        out += value
    elif kind in (LIST, SET):
        if len(value.items) < 15:
            out.append(len(value.items) << 4 | value.element_type)
        else:
            out.append(0xF0 | value.element_type)
            _varint(out, len(value.items))
        for item in value.items:
            _write_value(out, value.element_type, item)
    elif kind == MAP:
        _varint(out, len(value.items))
        if value.items:
            out.append(value.key_type << 4 | value.value_type)
        for key, item in value.items:
            _write_value(out, value.key_type, key)
            _write_value(out, value.value_type, item)
    elif kind == STRUCT:
        _write_struct(out, value)
    else:
        raise ValueError(f"unknown Thrift compact type {kind}")


# What the join knows of parquet's structs (parquet.thrift): the fields it may copy (shifting the
# offsets among them) and those it refuses. A field it does not know may hold an offset it would
# leave pointing into another part, so it is refused too.
_FILE_NAMES = {1: "version", 2: "schema", 3: "num_rows", 4: "row_groups", 5: "key_value_metadata"}
_FILE_NAMES |= {6: "created_by", 7: "column_orders"}
_FILE_REFUSED = {8: "encryption", 9: "encryption"}
_ROW_GROUP_FIELDS = frozenset(range(1, 8))  # columns, sizes, rows, sorting, file_offset 5, ordinal 7
_CHUNK_FIELDS = frozenset((2, 3))  # file_offset (deprecated: 0, or an offset) and meta_data
_CHUNK_REFUSED = {1: "column data in another file", 4: "a page index", 5: "a page index", 6: "a page index"}
_CHUNK_REFUSED |= {7: "a page index", 8: "encryption", 9: "encryption"}
_COLUMN_FIELDS = frozenset((*range(1, 14), 16, 17))  # 9, 10, 11: data, index, dictionary page offsets
_COLUMN_REFUSED = {14: "a bloom filter", 15: "a bloom filter"}
_COLUMN_OFFSETS = (9, 10, 11)


@dataclass(frozen=True)
class _Part:
    """A part's path, the length of its body (bytes [4, footer start)), its footer and that decoded."""

    path: str
    body: int
    footer: bytes
    meta: list[Field]


def join_parquet(parts: Sequence[str | os.PathLike], sink: BinaryIO) -> int:
    """Write to `sink` one parquet file holding the row groups of the parquet files `parts`, in
    order, byte-identical to the file one pyarrow ParquetWriter (same schema and writer properties)
    would have written of the same row groups; returns its number of rows (see `ParquetJoin`).
    Every part is read and checked before the first byte is written."""
    if not parts:
        raise ValueError("no parquet parts to join")
    join = ParquetJoin(sink)
    for planned in [join.plan(part) for part in parts]:
        join.write(planned)
    return join.close()


@dataclass(frozen=True)
class _Planned:
    """A part checked and placed: its row groups moved to where its body will land."""

    part: _Part
    rows: int
    groups: list[list[Field]]


class ParquetJoin:
    """One parquet file written to `sink` from parquet parts added in order, as they are ready:
    byte-identical to the file one pyarrow ParquetWriter (same schema and writer properties) would
    have written of the same row groups. Copies each part's column-chunk bytes (never decodes or
    recompresses them) through one reused buffer; `close` writes the merged footer. Each part's
    footer is read and checked before its bytes are written; a part that is refused (or changes
    after that) leaves the file written in part, so `sink` should be a file that appears only when
    complete (`_files.atomic_path`). A part that cannot be read is the OSError reading it raises.

    ValueError (one line, naming the part) for: no parts; a file that is not parquet or is cut
    short; parts whose schema, key-value metadata, writer or other file-level field differ; and
    parts with what the join cannot move: a page index, bloom filters, encryption, column data in
    another file, or a field parquet.thrift did not have when this was written. Our writers turn
    those off; a page index or bloom filter would be position-dependent data outside the column
    chunks, which the join would have to move and re-point as well."""

    def __init__(self, sink: BinaryIO) -> None:
        self.sink = sink
        self._first: _Part | None = None
        self._planned_groups = 0  # row groups of the parts planned so far
        self._planned_bytes = 0  # and the bytes of their bodies
        self._groups: list[list[Field]] = []  # the row groups written so far
        self._rows = 0
        self._buffer: memoryview | None = None

    def add(self, path: str | os.PathLike) -> None:
        """Check the part, then copy its row groups' bytes after those of the parts added before."""
        self.write(self.plan(path))

    def plan(self, path: str | os.PathLike) -> _Planned:
        """Read and check the part that follows those planned before; nothing is written."""
        part = _read_part(path)
        self._first = self._first or part
        _check_shared(self._first, part)
        rows = _value(part, part.meta, 3, I64)
        groups = [
            _moved_group(part, group, self._planned_bytes, self._planned_groups + k)
            for k, group in enumerate(_structs(part, part.meta, 4))
        ]
        self._planned_groups += len(groups)
        self._planned_bytes += part.body
        return _Planned(part, rows, groups)

    def write(self, planned: _Planned) -> None:
        """Copy a planned part's body (the parts are written in the order they were planned)."""
        if self._buffer is None:
            self.sink.write(MAGIC)
            self._buffer = memoryview(bytearray(COPY_BUFFER_BYTES))
        _copy_body(planned.part, self.sink, self._buffer)
        self._rows += planned.rows
        self._groups += planned.groups

    def close(self) -> int:
        """Write the merged footer (the first part's, with the rows summed and every part's row
        groups, moved to where its body landed); the file's number of rows."""
        if self._first is None or self._buffer is None:
            raise ValueError("no parquet parts to join")
        replaced = {3: Field(3, I64, self._rows), 4: Field(4, LIST, ThriftList(STRUCT, self._groups))}
        footer = encode_struct([replaced.get(field.id, field) for field in self._first.meta])
        self.sink.write(footer)
        self.sink.write(len(footer).to_bytes(4, "little") + MAGIC)
        return self._rows


def read_footer(path: str | os.PathLike) -> tuple[bytes, int]:
    """(the footer's bytes, the body's length) of a parquet file; ValueError if it is not one."""
    with open(path, "rb") as file:
        size = file.seek(0, os.SEEK_END)
        if size < 12:
            raise ValueError(f"{os.fspath(path)}: not a parquet file ({size} bytes)")
        file.seek(0)
        head = file.read(4)
        file.seek(size - 8)
        tail = file.read(8)
        if tail[4:] == b"PARE":
            raise ValueError(f"{os.fspath(path)}: an encrypted parquet file, which the join cannot move")
        if head != MAGIC or tail[4:] != MAGIC:
            raise ValueError(f"{os.fspath(path)}: not a parquet file (no PAR1 at its start and end)")
        length = int.from_bytes(tail[:4], "little")
        if length > size - 12:
            raise ValueError(f"{os.fspath(path)}: not a whole parquet file (footer of {length} bytes in {size})")
        file.seek(size - 8 - length)
        return file.read(length), size - 12 - length


def _read_part(path: str | os.PathLike) -> _Part:
    footer, body = read_footer(path)
    name = os.fspath(path)
    try:
        meta = decode_struct(footer)
    except ValueError as exc:
        raise ValueError(f"{name}: not a parquet footer ({exc})") from None
    if encode_struct(meta) != footer:
        # The merged footer is written in the canonical form; a part in another would differ.
        raise ValueError(f"{name}: footer not in the form Thrift's writers give it")
    _check_known(name, meta, frozenset(_FILE_NAMES), _FILE_REFUSED, "FileMetaData")
    return _Part(name, body, footer, meta)


def _check_shared(first: _Part, part: _Part) -> None:
    """Every part shares the first one's file-level fields (schema, key-value metadata, writer...)."""
    shared, own = _file_fields(first.meta), _file_fields(part.meta)
    differing = [field_id for field_id, field in own.items() if shared.get(field_id) != field]
    differing += [field_id for field_id in shared if field_id not in own]
    if differing:
        names = ", ".join(sorted({_FILE_NAMES[field_id] for field_id in differing}))
        raise ValueError(f"{part.path}: its {names} differ from those of {first.path}")


def _file_fields(meta: list[Field]) -> dict[int, Field]:
    """The file-level fields every part must share: all but the rows and the row groups."""
    return {field.id: field for field in meta if field.id not in (3, 4)}


def _moved_group(part: _Part, group: list[Field], shift: int, ordinal: int) -> list[Field]:
    """A row group of `part` with its offsets `shift` bytes later and its ordinal, if it has one,
    `ordinal`: where it is in the joined file."""
    _check_known(part.path, group, _ROW_GROUP_FIELDS, {}, "RowGroup")
    columns = [_moved_chunk(part, chunk, shift) for chunk in _structs(part, group, 1)]
    if ordinal >= 1 << 15 and any(field.id == 7 for field in group):
        raise ValueError(f"{part.path}: more row groups than a parquet ordinal can number")
    moved = {1: Field(1, LIST, ThriftList(STRUCT, columns)), 7: Field(7, I16, ordinal)}
    return [moved.get(field.id, field) for field in _shifted(part, group, (5,), shift)]


def _moved_chunk(part: _Part, chunk: list[Field], shift: int) -> list[Field]:
    _check_known(part.path, chunk, _CHUNK_FIELDS, _CHUNK_REFUSED, "ColumnChunk")
    column = _value(part, chunk, 3, STRUCT)
    _check_known(part.path, column, _COLUMN_FIELDS, _COLUMN_REFUSED, "ColumnMetaData")
    moved = Field(3, STRUCT, _shifted(part, column, _COLUMN_OFFSETS, shift))
    start = min((field.value for field in column if field.id in _COLUMN_OFFSETS and field.value), default=0)
    if not _value(part, column, 9, I64) or start + _value(part, column, 7, I64) > 4 + part.body:
        raise ValueError(f"{part.path}: a column chunk outside the file's data")
    return [moved if field.id == 3 else field for field in _shifted(part, chunk, (2,), shift)]


def _shifted(part: _Part, fields: list[Field], offsets: tuple[int, ...], shift: int) -> list[Field]:
    """`fields` with the i64 offsets among them `shift` bytes later. Each must point into the
    part's body (or to its end, where old parquet-cpp put a chunk's file_offset), or the footer
    does not describe the file it ends; 0, which no data can start at, means none (pyarrow's
    deprecated ColumnChunk file_offset, old parquet-cpp's index_page_offset) and stays 0."""
    moved = []
    for field in fields:
        if field.id in offsets:
            if field.type != I64 or not (field.value == 0 or 4 <= field.value <= 4 + part.body):
                raise ValueError(f"{part.path}: an offset ({field.value!r}) outside the file's data")
            field = Field(field.id, I64, field.value + shift if field.value else 0)
        moved.append(field)
    return moved


def _check_known(path: str, fields: list[Field], known: frozenset[int], refused: dict[int, str], name: str) -> None:
    for field in fields:
        if field.id in refused:
            raise ValueError(f"{path}: has {refused[field.id]} ({name} field {field.id}), which the join cannot move")
        if field.id not in known:
            raise ValueError(f"{path}: {name} field {field.id}, unknown to the join (it may hold an offset)")


def _value(part: _Part, fields: list[Field], field_id: int, kind: int) -> Any:
    """The value of a required field of type `kind`; ValueError if it is missing or of another type."""
    for field in fields:
        if field.id == field_id:
            if field.type != kind:
                raise ValueError(f"{part.path}: footer field {field_id} of type {field.type}, not {kind}")
            return field.value
    raise ValueError(f"{part.path}: footer without its required field {field_id}")


def _structs(part: _Part, fields: list[Field], field_id: int) -> list[list[Field]]:
    """The structs of a required list field."""
    value = _value(part, fields, field_id, LIST)
    if value.element_type != STRUCT:
        raise ValueError(f"{part.path}: footer field {field_id} is not a list of structs")
    return value.items


def _copy_body(part: _Part, sink: BinaryIO, buffer: memoryview) -> None:
    """Copy bytes [4, 4 + body) of the part to `sink` through `buffer`, never holding more."""
    with open(part.path, "rb", buffering=0) as file:
        if os.fstat(file.fileno()).st_size != part.body + len(part.footer) + 12:
            raise ValueError(f"{part.path}: changed since its footer was read")
        file.seek(len(MAGIC))
        left = part.body
        while left:
            got = file.readinto(buffer[: min(left, len(buffer))])
            if not got:
                raise ValueError(f"{part.path}: shorter than when its footer was read")
            sink.write(buffer[:got])
            left -= got
