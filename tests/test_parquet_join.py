"""The byte-level join of parquet parts (`mrcr_gen._parquet_join`): the joined file is the file one
writer would have written of the same row groups, byte for byte; its Thrift codec gives footers
back unchanged; what it cannot move it refuses in one line, before writing anything."""

from __future__ import annotations

import io
import itertools
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mrcr_gen import _parquet_join
from mrcr_gen._parquet_join import (
    BINARY,
    BOOL,
    BYTE,
    DOUBLE,
    I16,
    I32,
    I64,
    LIST,
    MAP,
    SET,
    STRUCT,
    TRUE,
    Field,
    ThriftList,
    ThriftMap,
    decode_struct,
    encode_struct,
    join_parquet,
    read_footer,
)
from tests.support import REAL_ROWS

PYARROW_DATA = Path(pa.__file__).parent / "tests" / "data" / "parquet"

#: The properties our generator writes with (mrcr_gen._parquet.RowGroupWriter, and dictionaries
#: only on the columns that are not text), pyarrow's defaults, and others a writer might use.
OURS = "ours"
PROPERTIES = {
    OURS: None,  # filled per schema: the lists name its non-text columns
    "defaults": {},
    "others": {"compression": "snappy", "data_page_version": "2.0", "write_page_checksum": True},
}


def properties(name: str, schema: pa.Schema) -> dict:
    if name != OURS:
        return PROPERTIES[name]
    numbers = [field.name for field in schema if not pa.types.is_string(field.type)]
    return {"compression": "zstd", "write_batch_size": 1, "write_statistics": numbers, "use_dictionary": numbers}


def write(where, schema: pa.Schema, groups: list[pa.Table], **props) -> None:
    """One writer, one row group per table: what the generator's RowGroupWriter does."""
    writer = pq.ParquetWriter(where, schema, **props)
    for group in groups:
        writer.write_table(group, row_group_size=group.num_rows)
    writer.close()


def written(schema: pa.Schema, groups: list[pa.Table], **props) -> bytes:
    sink = io.BytesIO()
    write(sink, schema, groups, **props)
    return sink.getvalue()


def joined(parts: list[Path]) -> bytes:
    sink = io.BytesIO()
    join_parquet(parts, sink)
    return sink.getvalue()


# A text made of this alphabet: ASCII, accents, CJK, an emoji, a NUL, a newline.
ALPHABET = "abc xyz ÉéüßçÑ中文字符🙂\x00\n"


def text(seed: int, length: int) -> str:
    """`length` characters, a random run repeated: megabytes fast, several pages once compressed."""
    rng = random.Random(seed)
    run = "".join(rng.choices(ALPHABET, k=min(length, 4093)))
    return (run * (length // max(len(run), 1) + 1))[:length]


LENGTHS = st.integers(0, 300) | st.integers(0, 300) | st.integers(0, 300) | st.sampled_from([1 << 20, 2_000_000])


@st.composite
def tables_in_parts(draw) -> tuple[pa.Table, list[int], list[int]]:
    """A table, its row groups' sizes, and a cut of the groups into consecutive parts (a cut
    repeated, or at either end, makes a part of no row groups)."""
    sizes = draw(st.lists(st.integers(1, 4), min_size=1, max_size=6))
    rows = sum(sizes)
    nulls = draw(st.booleans())
    columns = {}
    for i in range(draw(st.integers(1, 2))):
        lengths = draw(st.lists(LENGTHS, min_size=rows, max_size=rows))
        values = [text(draw(st.integers(0, 99)), length) for length in lengths]
        columns[f"text{i}"] = [None if nulls and draw(st.booleans()) else value for value in values]
    ints = st.integers(-(1 << 63), (1 << 63) - 1)
    numbers = ints | st.none() if nulls else ints
    for i in range(draw(st.integers(0, 2))):
        columns[f"n{i}"] = draw(st.lists(numbers, min_size=rows, max_size=rows))
    schema = pa.schema([(name, pa.string() if name.startswith("text") else pa.int64()) for name in columns])
    cuts = sorted(draw(st.lists(st.integers(0, len(sizes)), max_size=4)))
    return pa.table(columns, schema=schema), sizes, cuts


def groups_of(table: pa.Table, sizes: list[int]) -> list[pa.Table]:
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    return [table.slice(start, size).combine_chunks() for start, size in zip(starts, sizes, strict=True)]


def write_parts(tmp_path: Path, schema: pa.Schema, groups: list[pa.Table], cuts: list[int], **props) -> list[Path]:
    bounds = [0, *cuts, len(groups)]
    paths = []
    for i, (start, end) in enumerate(itertools.pairwise(bounds)):
        path = tmp_path / f"part-{i}.parquet"
        write(path, schema, groups[start:end], **props)
        paths.append(path)
    return paths


def assert_same_offsets(a: bytes, b: bytes) -> None:
    """Every column chunk of `b` starts where that of `a` does (an offset not moved would not)."""
    left, right = pq.ParquetFile(pa.BufferReader(a)).metadata, pq.ParquetFile(pa.BufferReader(b)).metadata
    assert left.num_row_groups == right.num_row_groups
    for i in range(left.num_row_groups):
        for j in range(left.num_columns):
            one, other = left.row_group(i).column(j), right.row_group(i).column(j)
            assert (one.data_page_offset, one.dictionary_page_offset) == (
                other.data_page_offset,
                other.dictionary_page_offset,
            )


@pytest.mark.parametrize("name", list(PROPERTIES))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(drawn=tables_in_parts())
def test_the_joined_parts_are_the_file_one_writer_writes_of_their_row_groups(tmp_path_factory, name, drawn):
    table, sizes, cuts = drawn
    tmp_path = tmp_path_factory.mktemp("parts")
    props = properties(name, table.schema)
    groups = groups_of(table, sizes)
    whole = written(table.schema, groups, **props)
    parts = write_parts(tmp_path, table.schema, groups, cuts, **props)
    sink = io.BytesIO()
    assert join_parquet(parts, sink) == table.num_rows
    assert sink.getvalue() == whole
    assert pq.read_table(pa.BufferReader(sink.getvalue())).equals(table)


def test_offsets_move_with_the_part_and_every_column_reads_back(tmp_path):
    """Parts of several row groups each, with dictionaries: every group's chunks start where one
    writer put them, and every column of every group reads back."""
    table = pa.table({"text": [text(seed, 5000 * seed) for seed in range(9)], "n": list(range(9))})
    props = properties(OURS, table.schema)
    groups = groups_of(table, [2, 1, 3, 1, 2])
    whole = written(table.schema, groups, **props)
    result = joined(write_parts(tmp_path, table.schema, groups, [2, 3], **props))
    assert_same_offsets(whole, result)
    assert pq.ParquetFile(pa.BufferReader(result)).metadata.row_group(3).column(1).dictionary_page_offset > 4
    for i, group in enumerate(groups):
        assert pq.ParquetFile(pa.BufferReader(result)).read_row_group(i).equals(group)
    assert result == whole


def _groups(data: bytes) -> list[list[Field]]:
    footer = data[-8 - int.from_bytes(data[-8:-4], "little") : -8]
    return next(field for field in decode_struct(footer) if field.id == 4).value.items


def with_every_offset(meta: list[Field]) -> list[Field]:
    """`meta` as older writers wrote it: each row group with its ordinal, each column chunk's
    file_offset and index_page_offset pointing at its first page (pyarrow writes neither)."""

    def chunk(fields: list[Field]) -> list[Field]:
        column = fields[1].value
        start = next(field.value for field in column if field.id == 9)
        column = sorted([*column, Field(10, I64, start)], key=lambda field: field.id)
        return [Field(2, I64, start), Field(3, STRUCT, column)]

    def group(fields: list[Field], ordinal: int) -> list[Field]:
        columns = ThriftList(STRUCT, [chunk(item) for item in fields[0].value.items])
        return [Field(1, LIST, columns), *fields[1:], Field(7, I16, ordinal)]

    def file_field(field: Field) -> Field:
        if field.id != 4:
            return field
        return Field(4, LIST, ThriftList(STRUCT, [group(item, i) for i, item in enumerate(field.value.items)]))

    return [file_field(field) for field in meta]


def test_every_offset_a_footer_may_hold_moves_and_ordinals_are_renumbered(tmp_path):
    table = pa.table({"text": [text(seed, 3000) for seed in range(6)], "n": [7, 7, 8, 8, 9, 9]})
    props = properties(OURS, table.schema)
    groups = groups_of(table, [1, 2, 2, 1])
    whole = tmp_path / "whole.parquet"
    write(whole, table.schema, groups, **props)
    parts = write_parts(tmp_path, table.schema, groups, [1, 3], **props)
    for path in [whole, *parts]:
        rewrite_footer(path, with_every_offset)
    result = joined(parts)
    assert result == whole.read_bytes()
    ordinals = [field.value for group in _groups(result) for field in group if field.id == 7]
    assert ordinals == [0, 1, 2, 3]
    assert pq.read_table(pa.BufferReader(result)).equals(table)


def test_one_part_joins_to_its_own_bytes_and_no_part_is_refused(tmp_path):
    table = pa.table({"text": ["a", "é" * 1000], "n": [1, 2]})
    path = tmp_path / "one.parquet"
    write(path, table.schema, [table], **properties(OURS, table.schema))
    assert joined([path]) == path.read_bytes()
    with pytest.raises(ValueError, match="no parquet parts"):
        join_parquet([], io.BytesIO())


def test_a_part_changed_after_its_footer_was_read_is_refused(tmp_path, monkeypatch):
    groups = groups_of(TABLE, [1, 1])
    parts = write_parts(tmp_path, TABLE.schema, groups, [1])
    read_part = _parquet_join._read_part

    def then_changed(path):
        part = read_part(path)
        if str(path).endswith("part-1.parquet"):
            with open(path, "ab") as file:
                file.write(b"more")
        return part

    monkeypatch.setattr(_parquet_join, "_read_part", then_changed)
    with pytest.raises(ValueError, match=r"part-1\.parquet: changed since its footer was read"):
        join_parquet(parts, io.BytesIO())


def test_bodies_go_through_the_buffer_in_writes_no_larger(tmp_path, monkeypatch):
    """A sink that only has `write` (a hashing file) gets the bodies in pieces of the buffer's
    size at most: a part is never held whole."""
    monkeypatch.setattr(_parquet_join, "COPY_BUFFER_BYTES", 1000)
    table = pa.table({"text": [text(seed, 30_000) for seed in range(4)]})
    groups = groups_of(table, [1, 2, 1])
    parts = write_parts(tmp_path, table.schema, groups, [1, 2])

    class WriteOnly:
        def __init__(self) -> None:
            self.writes: list[bytes] = []

        def write(self, data) -> int:
            self.writes.append(bytes(data))
            return len(data)

    sink = WriteOnly()
    join_parquet(parts, sink)  # type: ignore[arg-type]
    assert b"".join(sink.writes) == written(table.schema, groups)
    bodies = sink.writes[1:-2]  # between the magic and the footer, its length and the magic
    assert max(len(piece) for piece in bodies) == 1000
    assert sum(len(piece) for piece in bodies) == sum(
        path.stat().st_size - 12 - len(read_footer(path)[0]) for path in parts
    )


# The codec.


def footers() -> list[Path]:
    return [path for path in [REAL_ROWS, *sorted(PYARROW_DATA.glob("*.parquet"))] if path.exists()]


@pytest.mark.parametrize("path", footers(), ids=lambda path: path.name)
def test_decoding_and_encoding_a_real_footer_gives_its_bytes_back(path):
    footer, _ = read_footer(path)
    assert encode_struct(decode_struct(footer)) == footer


def test_the_real_rows_are_here_or_skipped():
    if not REAL_ROWS.exists():
        pytest.skip("../shared/mrcr-real is not on this machine")
    footer, body = read_footer(REAL_ROWS)
    assert body + len(footer) + 12 == REAL_ROWS.stat().st_size
    assert joined([REAL_ROWS]) == REAL_ROWS.read_bytes()


@pytest.mark.parametrize(
    "props",
    [{}, {"write_page_index": True}, {"bloom_filter_options": {"n": {"ndv": 10, "fpp": 0.01}}}, {"version": "1.0"}],
)
def test_footers_written_here_round_trip(props):
    table = pa.table({"text": ["a", None, "ü" * 70_000], "n": [-1, 0, 1 << 62]})
    data = written(table.schema, [table.slice(0, 1), table.slice(1)], **props)
    footer = data[-8 - int.from_bytes(data[-8:-4], "little") : -8]
    assert encode_struct(decode_struct(footer)) == footer


def values(kind: int, depth: int) -> st.SearchStrategy:
    """Values of one compact-protocol type, containers of every type included, nested at most
    a few levels deep."""
    scalars = {
        BOOL: st.booleans(),
        BYTE: st.integers(-128, 127),
        I16: st.integers(-(1 << 15), (1 << 15) - 1),
        I32: st.integers(-(1 << 31), (1 << 31) - 1),
        I64: st.integers(-(1 << 63), (1 << 63) - 1),
        DOUBLE: st.floats(allow_nan=False),
        BINARY: st.binary(max_size=40),
    }
    if kind in scalars:
        return scalars[kind]
    kinds = st.sampled_from([*scalars, *([LIST, SET, MAP, STRUCT] if depth < 3 else [])])
    if kind in (LIST, SET):
        return kinds.flatmap(
            lambda element: st.builds(ThriftList, st.just(element), st.lists(values(element, depth + 1), max_size=17))
        )
    if kind == MAP:
        full = st.tuples(kinds, kinds).flatmap(
            lambda types: st.builds(
                ThriftMap,
                st.just(types[0]),
                st.just(types[1]),
                st.lists(st.tuples(values(types[0], depth + 1), values(types[1], depth + 1)), min_size=1, max_size=3),
            )
        )
        return st.just(ThriftMap(0, 0, [])) | full  # an empty map is written without its types
    return structs(depth + 1)


def structs(depth: int = 0) -> st.SearchStrategy:
    """Structs of fields of any type and id (in any order: short and long field headers)."""
    kinds = [BOOL, BYTE, I16, I32, I64, DOUBLE, BINARY, *([LIST, SET, MAP, STRUCT] if depth < 3 else [])]
    field = st.tuples(st.sampled_from(kinds), st.integers(-(1 << 15), (1 << 15) - 1)).flatmap(
        lambda kind_id: st.builds(Field, st.just(kind_id[1]), st.just(kind_id[0]), values(kind_id[0], depth))
    )
    return st.lists(field, max_size=5)


@settings(max_examples=300, deadline=None)
@given(struct=structs())
def test_any_struct_encodes_and_decodes_to_itself(struct):
    """Any field order and ids (short and long headers), every type, nested: decoding the
    encoding gives the struct, and encoding that gives the same bytes."""
    data = encode_struct(struct)
    assert decode_struct(data) == struct
    assert encode_struct(decode_struct(data)) == data


def test_the_compact_forms_are_apache_thrifts():
    """Pinned bytes: short and long field headers, bools in the header and in a list, zigzag,
    a list of more than 14 elements, an empty and a full map, a nested struct."""
    struct = [
        Field(1, BOOL, True),
        Field(2, BOOL, False),
        Field(20, I32, -3),
        Field(3, LIST, ThriftList(TRUE, [True, False])),
        Field(4, LIST, ThriftList(BYTE, [0] * 15)),
        Field(5, MAP, ThriftMap(0, 0, [])),
        Field(6, MAP, ThriftMap(BINARY, I64, [(b"k", 1)])),
        Field(7, STRUCT, [Field(1, I16, 64)]),
    ]
    expected = bytes([0x11, 0x12, 0x05, 40, 5, 0x09, 6, 0x21, 1, 2, 0x19, 0xF3, 15, *[0] * 15])
    expected += bytes([0x1B, 0, 0x1B, 1, 0x86, 1]) + b"k" + bytes([2, 0x1C, 0x14, 0x80, 0x01, 0, 0])
    assert encode_struct(struct) == expected
    assert decode_struct(expected) == struct


def test_nesting_deeper_than_any_footer_is_refused_not_a_recursion_error():
    """Each byte 0x19 opens a list (in a field, then as the element type) holding one more."""
    with pytest.raises(ValueError, match="nested deeper than 64"):
        decode_struct(b"\x19" * 5000)
    with pytest.raises(ValueError, match="nested deeper than 64"):
        decode_struct(b"\x1c" * 5000)  # structs in structs


# Refusals: one line, naming the part, and nothing written.


def refused(parts: list[Path], match: str) -> None:
    sink = io.BytesIO()
    with pytest.raises(ValueError, match=match) as caught:
        join_parquet(parts, sink)
    assert "\n" not in str(caught.value)
    assert sink.getvalue() == b""


def part(path: Path, table: pa.Table, **props) -> Path:
    write(path, table.schema, [table], **props)
    return path


TABLE = pa.table({"text": ["a", "b"], "n": [1, 2]})


def test_parts_of_other_schemas_or_metadata_are_refused(tmp_path):
    first = part(tmp_path / "first.parquet", TABLE)
    other = part(tmp_path / "other.parquet", pa.table({"text": ["a"], "n": [1.5]}))
    refused([first, other], r"other\.parquet: its .*schema.* differ from those of .*first\.parquet")
    labelled = part(tmp_path / "labelled.parquet", TABLE.replace_schema_metadata({"recipe": "x"}))
    refused([first, labelled], r"labelled\.parquet: its key_value_metadata differ")


def rewrite_footer(path: Path, change) -> Path:
    """Give a parquet file the footer `change(fields)` makes of its own."""
    data = path.read_bytes()
    footer, body = read_footer(path)
    new = encode_struct(change(decode_struct(footer)))
    path.write_bytes(data[: 4 + body] + new + len(new).to_bytes(4, "little") + b"PAR1")
    return path


def test_any_other_file_level_difference_is_refused(tmp_path):
    first = part(tmp_path / "first.parquet", TABLE)
    other = rewrite_footer(
        part(tmp_path / "other.parquet", TABLE),
        lambda meta: [Field(6, BINARY, b"another writer") if field.id == 6 else field for field in meta],
    )
    refused([first, other], r"other\.parquet: its created_by differ")


def first_column(meta: list[Field], change) -> list[Field]:
    """`meta` with `change` applied to the ColumnChunk of the first column of the first row group."""
    groups = next(field for field in meta if field.id == 4).value
    group = groups.items[0]
    columns = next(field for field in group if field.id == 1).value
    columns.items[0] = change(columns.items[0])
    return meta


@pytest.mark.parametrize(
    ("props", "change", "match"),
    [
        ({"write_page_index": True}, None, "a page index"),
        ({"bloom_filter_options": {"n": {"ndv": 10, "fpp": 0.01}}}, None, "a bloom filter"),
        ({}, lambda meta: [*meta, Field(8, STRUCT, [Field(1, STRUCT, [])])], "encryption"),
        ({}, lambda meta: [*meta, Field(30, I64, 4)], "FileMetaData field 30, unknown"),
        ({}, lambda meta: first_column(meta, lambda chunk: [Field(1, BINARY, b"x.parquet"), *chunk]), "another file"),
        ({}, lambda meta: first_column(meta, lambda chunk: [*chunk, Field(9, BINARY, b"")]), "encryption"),
        (
            {},
            lambda meta: first_column(
                meta, lambda chunk: [chunk[0], Field(3, STRUCT, [*chunk[1].value, Field(40, I64, 4)])]
            ),
            "ColumnMetaData field 40",
        ),
        (
            {},
            lambda meta: first_column(
                meta,
                lambda chunk: [
                    chunk[0],
                    Field(3, STRUCT, [Field(9, I64, 1 << 40) if f.id == 9 else f for f in chunk[1].value]),
                ],
            ),
            "outside the file's data",
        ),
        ({}, lambda meta: [field for field in meta if field.id != 3], "required field 3"),
        ({}, lambda meta: [Field(3, BINARY, b"3") if field.id == 3 else field for field in meta], "field 3 of type"),
    ],
    ids=[
        "page index",
        "bloom filter",
        "encrypted",
        "unknown file field",
        "file_path",
        "encrypted column",
        "unknown column field",
        "offset past the body",
        "no num_rows",
        "num_rows of another type",
    ],
)
def test_what_the_join_cannot_move_is_refused(tmp_path, props, change, match):
    good = part(tmp_path / "good.parquet", TABLE)
    bad = part(tmp_path / "bad.parquet", TABLE, **props)
    if change is not None:
        rewrite_footer(bad, change)
    refused([good, bad], r"bad\.parquet: .*" + match)


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"", "not a parquet file"),
        (b"name,text\n1,a\n", "not a parquet file"),
        (b"PAR1" + b"\x00" * 20 + b"PAR2", "not a parquet file"),
        (b"PAR1" + b"\x00" * 20 + b"PARE", "an encrypted parquet file"),
        (b"PAR1" + b"\x00" * 4 + (5).to_bytes(4, "little") + b"PAR1", "not a whole parquet file"),
        (b"PAR1" + (0xFFFFFFFF).to_bytes(4, "little") + b"PAR1", "not a whole parquet file"),
        (b"PAR1\x19\x0c\x01\x00\x00\x00PAR1", "not a parquet footer"),
    ],
    ids=[
        "empty",
        "csv",
        "bad end magic",
        "encrypted footer",
        "footer past the start",
        "length past the file",
        "garbage footer",
    ],
)
def test_what_is_not_parquet_is_refused(tmp_path, data, match):
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(data)
    refused([part(tmp_path / "good.parquet", TABLE), bad], r"bad\.parquet: " + match)


def test_a_cut_short_part_is_refused(tmp_path):
    data = part(tmp_path / "whole.parquet", TABLE).read_bytes()
    for cut in (1, 8, len(data) // 2):
        short = tmp_path / "short.parquet"
        short.write_bytes(data[:-cut])
        refused([short], r"short\.parquet: not a")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(position=st.integers(0, 10**6), byte=st.integers(0, 255))
def test_a_damaged_footer_is_joined_or_refused_never_a_crash(tmp_path_factory, position, byte):
    """One byte of a part's footer changed: the join either refuses it with a ValueError or
    writes a file, and never fails another way (an IndexError, a RecursionError...)."""
    path = part(tmp_path_factory.mktemp("damaged") / "damaged.parquet", TABLE, **properties(OURS, TABLE.schema))
    data = bytearray(path.read_bytes())
    footer, body = read_footer(path)
    data[4 + body + position % len(footer)] = byte
    path.write_bytes(bytes(data))
    try:
        join_parquet([path], io.BytesIO())
    except ValueError as exc:
        assert "\n" not in str(exc)
