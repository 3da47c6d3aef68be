"""The MRCR v2 fast paths give what the slow, obvious code gives: the CSV reader and writer (the csv
module's rows and bytes), the transcript splitter (the lookbehind regex it replaced), the hash
check (a substring search per hash), and a validation on 2 threads (the same report as on 1)."""

from __future__ import annotations

import csv
import hashlib
import io
import re
import shutil

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcr_gen.recipes.mrcr_v2 import V2Config, V2OfflineWriter, _rows, generate_v2, v2_bucket, validate_v2_paths
from mrcr_gen.recipes.mrcr_v2._assembler import HASH_ALPHABET, hash_windows
from mrcr_gen.recipes.mrcr_v2._rows import V2_COLUMNS, V2FileWriter, _CsvRows, iter_records
from mrcr_gen.recipes.mrcr_v2._text import TRANSCRIPT_OPEN, split_transcript

# Pieces that exercise every branch of a CSV reader: quotes, delimiters, every line break, NUL.
CSV_PIECES = st.sampled_from(['"', '""', ",", "\n", "\r", "\r\n", "a", "b c", " ", "\0", "é", "User: x"])
CSV_TEXT = st.lists(CSV_PIECES, max_size=40).map("".join)
CELL = st.lists(CSV_PIECES, max_size=12).map("".join)


def csv_module_rows(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text, newline="")))


BLOCK = st.sampled_from([1, 2, 3, 7, 1 << 20])  # reads that end anywhere: inside "\r\n", quotes, cells


@settings(max_examples=800, deadline=None)
@given(CSV_TEXT, BLOCK)
def test_csv_rows_are_the_csv_modules_on_any_text(text, block):
    try:
        expected = csv_module_rows(text)
    except csv.Error:
        with pytest.raises(csv.Error):  # where the csv module refuses, it is the csv module reading
            list(_CsvRows(io.StringIO(text, newline=""), block))
        return
    assert list(_CsvRows(io.StringIO(text, newline=""), block)) == expected


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(CELL, min_size=1, max_size=4), max_size=5), BLOCK)
def test_csv_rows_are_the_csv_modules_on_written_files(rows, block):
    buffer = io.StringIO(newline="")
    csv.writer(buffer).writerows(rows)
    text = buffer.getvalue()
    reader = _CsvRows(io.StringIO(text, newline=""), block)
    assert list(reader) == csv_module_rows(text)
    if "\0" not in text:
        assert reader._csv is None  # every record was cut by the fast path, multi-line quoted cells included


@settings(max_examples=200, deadline=None)
@given(queries=CELL, answer=CELL)
def test_the_csv_writer_writes_the_csv_modules_bytes(queries, answer, tmp_path_factory):
    record = {
        "queries": queries,
        "answer": answer,
        "context_len": 5,
        "answer_token_count": 1,
        "view_ops": "q",
        "num_relevant": 1,
        "answer_context_position": (1, 2),
        "index_positions_of_seeds": [0],
        "relevant_context_positions": [(1, 2)],
    }
    path = tmp_path_factory.mktemp("csv") / "rows.csv"
    with V2FileWriter(path, "csv") as writer:
        writer.write(record)
    expected = io.StringIO(newline="")
    out = csv.writer(expected)
    out.writerow(V2_COLUMNS)
    out.writerow([queries, answer, 5, 1, "q", 1, "(1, 2)", "[0]", "[(1, 2)]"])
    assert path.read_bytes() == expected.getvalue().encode("utf-8")
    assert [r["queries"] for r in iter_records(path)] == [queries]
    assert writer.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(0, 3 << 19), max_size=12), piece=st.sampled_from([1, 7, 1 << 20]))
def test_a_csv_files_sha256_as_written_is_the_sha256_of_its_bytes(sizes, piece, tmp_path_factory):
    """Written in pieces of any size (small ones hashed together, large ones alone), in order."""
    path = tmp_path_factory.mktemp("digest") / "bytes.bin"
    written = [bytes([i % 251]) * size for i, size in enumerate(sizes)]
    digesting = _rows._DigestingFile(open(path, "wb"), piece)
    for data in written:
        assert digesting.write(data) == len(data)
    assert digesting.close() == hashlib.sha256(b"".join(written)).hexdigest()
    assert path.read_bytes() == b"".join(written)


def test_an_aborted_csv_file_leaves_nothing_and_no_sha256(tmp_path):
    path = tmp_path / "rows.csv"
    with pytest.raises(RuntimeError), V2FileWriter(path, "csv") as writer:
        writer.write({"queries": "a\nb", **dict.fromkeys(V2_COLUMNS[1:], "x")})
        raise RuntimeError("stopped")
    assert writer.sha256 is None and list(tmp_path.iterdir()) == []


# The splitter before it searched for a literal: a turn head at the body's start or after a blank line.
OLD_TURN_HEAD_RE = re.compile(r"(?:\A|(?<=\n\n))User: (?P<ask>[^\n]*)\n\nAssistant: ")
TURN_PIECES = st.sampled_from(
    ["\n", "\n\n", "User: ", "Assistant: ", "ask", "x", " ", "User: ask\n\nAssistant: w\n\n", TRANSCRIPT_OPEN]
)


def old_split(transcript: str):
    body_start = transcript.find(TRANSCRIPT_OPEN)
    if body_start < 0:
        return None
    body_start += len(TRANSCRIPT_OPEN)
    heads = list(OLD_TURN_HEAD_RE.finditer(transcript, body_start))
    turns = []
    for i, head in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(transcript)
        turns.append((head.start(), end, head["ask"], transcript[head.end() : end].removesuffix("\n\n")))
    return body_start, turns


@settings(max_examples=600, deadline=None)
@given(st.lists(TURN_PIECES, max_size=30).map("".join))
def test_split_transcript_finds_the_turns_the_lookbehind_found(text):
    text = TRANSCRIPT_OPEN + text if "EXAMPLE 3" not in text else text
    new = split_transcript(text)
    old = old_split(text)
    if old is None:
        assert new is None
        return
    assert new is not None
    assert (new[0], [(t.start, t.end, t.ask, t.text) for t in new[1]]) == old


ALNUM_PIECES = st.sampled_from(["ab", "Z9", "0", "xyzXYZ", " ", "\n", "-", "é", "abcdefghijkl"])


@settings(max_examples=400, deadline=None)
@given(st.lists(ALNUM_PIECES, max_size=20).map("".join), st.text(alphabet=HASH_ALPHABET, min_size=12, max_size=12))
def test_a_hash_occurs_in_a_text_exactly_when_it_is_one_of_its_windows(text, secret):
    planted = text[: len(text) // 2] + secret + text[len(text) // 2 :]
    for candidate in (text, planted):
        assert (secret in hash_windows(candidate)) == (secret in candidate)
        assert all(window in candidate for window in hash_windows(candidate))


def test_validation_on_two_threads_reports_what_one_thread_reports(tmp_path):
    config = V2Config(needles=(2,), buckets=(v2_bucket(8192),), samples=6, rows_per_transcript=3, seed=3, out=tmp_path)
    [summary] = generate_v2(config, V2OfflineWriter(config.seed))
    path = tmp_path / summary["file"]
    # A copy whose second transcript's first row lies about its length: caught on either path.
    lines = path.read_text(encoding="utf-8").split("\r\n")
    broken = tmp_path / "broken.csv"
    shutil.copy(path, broken)
    records = list(csv.DictReader(io.StringIO("\r\n".join(lines), newline="")))
    records[3]["context_len"] = str(int(records[3]["context_len"]) + 1)
    with open(broken, "w", newline="", encoding="utf-8") as handle:
        out = csv.DictWriter(handle, V2_COLUMNS)
        out.writeheader()
        out.writerows(records)
    for target in (path, broken):
        one = validate_v2_paths([target], threads=1).report
        two = validate_v2_paths([target], threads=2).report
        assert one.model_dump() == two.model_dump()
    assert validate_v2_paths([path], threads=2).report.findings == []
    assert [f.check for f in validate_v2_paths([broken], threads=2).report.findings] == ["context_len"]


INTS = st.integers(-(2**63), 2**63 - 1)
V2_CELLS = {
    "queries": st.text(max_size=30),
    "context_len": INTS,
    "index_positions_of_seeds": st.lists(INTS, max_size=8),
    "relevant_context_positions": st.lists(st.lists(INTS, max_size=3), max_size=8),
}


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_the_parquet_columns_are_the_arrays_pa_array_builds(data):
    """Built from buffers (`_rows._column`), without pyarrow's builder (which imports pandas)."""
    import pyarrow as pa

    schema = _rows.v2_schema()
    for name, cells in V2_CELLS.items():
        values = data.draw(st.lists(cells, min_size=0, max_size=6))
        built = _rows._column(values, schema.field(name).type)
        built.validate(full=True)
        assert built.equals(pa.array(values, schema.field(name).type))
