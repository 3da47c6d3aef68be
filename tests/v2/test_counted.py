"""MRCR v2 validation counts a row once in its life: the generator seals each row's counts (its
tokens, its answer's, its key's turn spans) to the file in the sidecar, a validation of a file made
elsewhere caches them, and neither a wrong or stale sidecar nor a corrupted cache line changes a
finding: every report below is compared with a fresh count (no sidecar, no cache)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcr_gen._card import sidecar_path
from mrcr_gen._counts import seal, tokenizer_key
from mrcr_gen._tokens import count_tokens
from mrcr_gen.generate import GenerateRequest
from mrcr_gen.recipes.mrcr_v2 import (
    V2Assembler,
    V2Config,
    V2OfflineWriter,
    generate_v2,
    iter_v2_rows,
    load_v2_catalog,
    v2_bucket,
)
from mrcr_gen.recipes.mrcr_v2._command import one_unit
from mrcr_gen.recipes.mrcr_v2._counted import FOLDER, CountedCache, RowCounted
from mrcr_gen.recipes.mrcr_v2._rows import V2_COLUMNS, V2FileWriter, _csv_cell
from mrcr_gen.recipes.mrcr_v2._validate import SPEC
from mrcr_gen.validate import validate_paths
from tests.test_counts import _copy, _rewrite, in_processes, no_counting


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    """One CSV file of 4 needles in (4096, 8192]: 6 rows, 3 a transcript, with its sealed sidecar."""
    out = tmp_path_factory.mktemp("v2-counted") / "data"
    config = V2Config(needles=(4,), buckets=(v2_bucket(8192),), samples=6, rows_per_transcript=3, seed=7, out=out)
    generate_v2(config, V2OfflineWriter(7))
    [path] = out.rglob("*.csv")
    return path


def report(path: Path, cache: bool = True) -> dict:
    """The validation report of `path`, its file name made neutral (copies compare equal)."""
    found = validate_paths([path], spec=SPEC, workers=1, cache=cache).model_dump()
    return json.loads(json.dumps(found).replace(json.dumps(str(path))[1:-1], "FILE"))


def fresh(path: Path, tmp_path: Path) -> dict:
    """The report of a copy of `path` without its sidecar, counted with no cache."""
    return report(_copy(path, tmp_path / "fresh", sidecar=False), cache=False)


def test_the_generator_seals_every_row_s_counts_and_validation_counts_nothing(generated, tmp_path, monkeypatch):
    expected = fresh(generated, tmp_path)
    assert expected["summary"]["rows"] == 6 and expected["findings"] == []
    lines = [json.loads(line) for line in sidecar_path(generated).read_text().splitlines()]
    rows = list(iter_v2_rows(generated))
    for line, row in zip(lines, rows, strict=True):
        counted = line["counted"]
        assert line["n_tokens"] == row.context_len and counted["answer_tokens"] == row.answer_token_count
        assert counted["turns"] == list(row.index_positions_of_seeds)
        assert counted["positions"] == [list(p) for p in row.relevant_context_positions]
    no_counting(monkeypatch)
    assert report(generated, cache=False) == expected
    assert not (tmp_path / FOLDER).exists()


def _wrong_totals(row: int, record: dict) -> dict:
    return record | {"prompt_tokens": record["prompt_tokens"] + 7, "n_tokens": record["n_tokens"] + 7}


def _wrong_spans(row: int, record: dict) -> dict:
    # The totals as they are, the counts beside them edited (the seal covers them too).
    counted = record["counted"]
    moved = [[start + 1, end + 1] for start, end in counted["positions"]]
    return record | {"counted": counted | {"positions": moved, "answer_tokens": counted["answer_tokens"] + 1}}


def _resealed(record: dict, sha: str, key: str, row: int) -> dict:
    moved = _wrong_totals(row, _wrong_spans(row, record))
    return moved | {"seal": seal(sha, key, row, moved["prompt_tokens"], moved["n_tokens"], moved["counted"])}


def _stale(row: int, record: dict) -> dict:
    # A sidecar of another file, whole and consistent: its own sha256, its counts sealed to it.
    return _resealed(record, "0" * 64, tokenizer_key("o200k_base"), row) | {"data_sha256": "0" * 64}


def _other_tokenizer(row: int, record: dict) -> dict:
    # Counted and sealed by another tokenizer (the line's `tokenizer` left alone: it would choose
    # the recount's, which is not what this test is about).
    return _resealed(record, record["data_sha256"], "f" * 16, row)


def _torn(row: int, record: dict) -> dict:
    return record | {"counted": {"answer_tokens": "many"}} if row == 0 else record


@pytest.mark.parametrize("change", [_wrong_totals, _wrong_spans, _stale, _other_tokenizer, _torn])
def test_a_wrong_or_stale_sidecar_never_changes_a_finding(generated, tmp_path, change):
    expected = fresh(generated, tmp_path)
    copy = _copy(generated, tmp_path / "data", sidecar=True)
    _rewrite(copy, change)
    assert report(copy, cache=False) == expected


def test_a_file_edited_after_its_sidecar_is_recounted(generated, tmp_path):
    # A longer header on every row: each count moves, so the stale sidecar would hide the findings.
    copy = _copy(generated, tmp_path / "data", sidecar=True)
    text = copy.read_text(encoding="utf-8")
    copy.write_text(text.replace("Here are some examples", "Here are some more examples"), encoding="utf-8")
    expected = fresh(copy, tmp_path)
    assert {f["check"] for f in expected["findings"]} == {"context_len", "positions"}
    assert report(copy, cache=False) == expected


def test_a_second_validation_of_a_file_made_elsewhere_counts_nothing(generated, tmp_path, monkeypatch):
    copy = _copy(generated, tmp_path / "elsewhere", sidecar=False)
    first = report(copy)
    assert first == fresh(generated, tmp_path)
    no_counting(monkeypatch)
    assert report(copy) == first
    monkeypatch.undo()
    assert report(copy, cache=False) == first


def test_no_cache_neither_reads_nor_writes_the_cache(generated, tmp_path):
    copy = _copy(generated, tmp_path / "elsewhere", sidecar=False)
    report(copy, cache=False)
    assert not list(Path(_cache_folder()).rglob(f"{FOLDER}/*"))


def _cache_folder() -> str:
    import os

    return os.environ["MRCR_GEN_CACHE"]


def test_a_corrupted_or_torn_cache_line_is_ignored(generated, tmp_path):
    copy = _copy(generated, tmp_path / "elsewhere", sidecar=False)
    expected = report(copy)  # fills the cache
    [path] = Path(_cache_folder()).rglob(f"{FOLDER}/*.tsv")
    lines = path.read_text().splitlines()
    assert len(lines) == 6
    key, counted, check = lines[0].split("\t")
    record = json.loads(counted)
    wrong = f"{key}\t{json.dumps(record | {'tokens': record['tokens'] + 7})}\t{check}"
    path.write_text("\n".join([wrong, *lines[2:], lines[1][: len(lines[1]) // 2]]))
    assert report(copy) == expected
    assert report(copy) == expected  # the rows counted again were cached again, rightly
    assert CountedCache(path.parents[1], path.stem).get(key) is not None


def test_the_seal_covers_a_recipe_s_counts_and_is_unchanged_without_them():
    sha, key = "a" * 64, tokenizer_key("o200k_base")
    plain = seal(sha, key, 3, 10, 12)
    assert seal(sha, key, 3, 10, 12, None) == plain
    assert len({plain, seal(sha, key, 3, 10, 12, {"n": 1}), seal(sha, key, 3, 10, 12, {"n": 2})}) == 3


TEXT = st.text(st.characters(codec="utf-8"), max_size=60)


@settings(max_examples=300, deadline=None)
@given(before=TEXT, tail=st.sampled_from(["", " ", "  ", "\t", ".", "!!", "\n", "é", "12"]), after=TEXT)
def test_o200k_splits_where_a_turn_starts(before, tail, after):
    # Why a generated o200k row is not counted whole a second time (`splits_at_turns`): whatever
    # ends a turn before its blank line, "User:" after it starts a new piece.
    left, right = before + tail + "\n\n", "User: " + after
    assert count_tokens(left + right) == count_tokens(left) + count_tokens(right)


@pytest.mark.parametrize(
    ("options", "workers"),
    [
        ({"needles": (8,), "tokens": 1048576}, 1),  # one file: run here, no pool
        ({"needles": (8,), "bins": ("8192", "16384")}, None),
        ({"needles": (2, 4), "bins": ("8192",), "shard": "2/2"}, 1),  # the one file of this shard
        ({"needles": (2, 4), "bins": ("8192",)}, None),
        ({"needles": (8,)}, None),  # the default buckets
        ({"needles": (8,), "tokens": 1048576, "engine": "ray"}, None),  # Ray's workers are its own
        ({"needles": (8,), "bins": ("123",)}, None),  # refused when the job is planned
    ],
)
def test_a_one_file_shard_runs_in_this_process(options, workers):
    assert one_unit(GenerateRequest(**options)).workers == workers


def _put_many(folder: str, start: int) -> None:
    cache = CountedCache(Path(folder), tokenizer_key("o200k_base"))
    for i in range(start, start + 200):
        cache.put(f"{i:032x}", RowCounted(i, None, 3, (0, 2), ((5, 9), (12, 20))))


def test_concurrent_validations_never_tear_the_cache(tmp_path):
    in_processes(_put_many, tmp_path, [0, 200, 400])
    cache = CountedCache(tmp_path, tokenizer_key("o200k_base"))
    assert all(cache.get(f"{i:032x}") == RowCounted(i, None, 3, (0, 2), ((5, 9), (12, 20))) for i in range(600))
    assert len(cache.path.read_text().splitlines()) == 600


@pytest.mark.parametrize("transcript", ['a "quoted" turn\n\n', "no line break ", 'one\n"', "NUL \0 here\n"])
def test_rows_sharing_a_transcript_are_written_as_the_csv_module_writes_them(tmp_path, transcript):
    rows = [
        {
            "queries": transcript + view_ops,
            "answer": 'x"y',
            "context_len": 7,
            "answer_token_count": 2,
            "view_ops": view_ops,
            "num_relevant": 1,
            "answer_context_position": (0, 3),
            "index_positions_of_seeds": (0,),
            "relevant_context_positions": ((0, 3),),
        }
        for view_ops in ('User: the "first"', "User: plain", "", "two\nlines")
    ]
    with V2FileWriter(tmp_path / "rows.csv") as writer:
        for row in rows:
            writer.write(row)
    expected = io.StringIO(newline="")
    plain = csv.writer(expected)
    plain.writerow(V2_COLUMNS)
    for row in rows:
        plain.writerow([_csv_cell(name, row[name]) for name in V2_COLUMNS])
    assert (tmp_path / "rows.csv").read_bytes() == expected.getvalue().encode("utf-8")


@pytest.mark.parametrize("n_needles", [2, 4, 8])
def test_the_needle_turns_composed_ahead_are_those_used(n_needles):
    # While a key's turns are counted, the next key's are composed as the rng will draw them: only
    # the key after the last one fitted is composed for nothing.
    assembler = V2Assembler(writer=V2OfflineWriter(3), catalog=load_v2_catalog())
    transcript = assembler.build(n_needles=n_needles, target=65536, lowest=62000, seed=(3, 0))
    assert transcript.hashes and len(assembler._counting) <= n_needles


def test_the_v2_cache_is_bounded_as_the_count_cache_is(tmp_path, monkeypatch):
    """The same `CheckedLines` file as the count cache: duplicated lines (runs that counted the same
    rows at once) are compacted by the next run that writes, each row kept once, its counts intact."""
    from mrcr_gen import _counts

    monkeypatch.setattr(_counts, "DUPLICATE_SLACK", 0)
    for _ in range(3):  # three runs each added rows 0-9
        _put_many_rows(tmp_path, range(10))  # 10, 20, 30 lines: never more than 2 x 10 + 0 when loaded
    cache = CountedCache(tmp_path, tokenizer_key("o200k_base"))
    assert len(cache.path.read_text().splitlines()) == 30
    cache.put(f"{10:032x}", _row(10))  # a fourth run writes: 31 lines > 2 x 11 rows
    assert len(cache.path.read_text().splitlines()) == 11
    again = CountedCache(tmp_path, tokenizer_key("o200k_base"))
    assert all(again.get(f"{i:032x}") == _row(i) for i in range(11))


def _row(i: int) -> RowCounted:
    return RowCounted(i, None, 3, (0, 2), ((5, 9), (12, 20)))


def _put_many_rows(folder: Path, rows) -> None:
    cache = CountedCache(folder, tokenizer_key("o200k_base"))
    for i in rows:  # appended even where the run already has the row (what concurrent runs do)
        cache.lines.append(f"{i:032x}", json.dumps({"tokens": i, **_row(i).record()}, separators=(",", ":")))
