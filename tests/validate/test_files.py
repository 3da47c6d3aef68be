"""File validation: streaming, file-level findings, inputs, parallel recount, real rows."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from mrcr_gen import MRCR_SCHEMA, validate_file, validate_paths
from mrcr_gen.recipes.openai_mrcr._validate import SPEC
from mrcr_gen.validate import _files, _parquet_rows, expand_paths
from tests.support import REAL_ROWS as REAL
from tests.support.rowkit import MUTATIONS, make_row, write_rows

FILE_MUTATIONS = sorted(name for name in MUTATIONS if name != "wrong_type")  # parquet types forbid it


@pytest.mark.parametrize("name", FILE_MUTATIONS)
def test_only_the_mutated_row_is_flagged(tmp_path: Path, name: str) -> None:
    mutate, expected = MUTATIONS[name]
    rows = [make_row(seed, n_needles=3) for seed in range(6)]
    rows[4] = mutate(rows[4])
    report = validate_file(write_rows(tmp_path / "x.parquet", rows), tokens=False, workers=1)
    assert {f.row for f in report.findings} == {4}
    assert {f.check for f in report.findings} == expected
    assert report.summary.rows == 6
    errors = any(f.is_error for f in report.findings)
    assert report.summary.rows_with_errors == (1 if errors else 0)
    assert report.exit_code == (1 if errors else 0)


def test_clean_file_summary(tmp_path: Path) -> None:
    path = write_rows(tmp_path / "ok.parquet", [make_row(s, n_needles=1 + s % 3, filler=400) for s in range(4)])
    report = validate_file(path, workers=1)
    assert report.findings == [] and report.exit_code == 0
    assert report.summary.model_dump() == {
        "files": 1,
        "rows": 4,
        "rows_with_errors": 0,
        "by_check": {},
        "by_bin": {"[4096, 8192]": {"1": 2, "2": 1, "3": 1}},
        "tokenizers": {str(path): "o200k_base"},  # no dataset card: the default counted
        "hub_sources": {},
        "shortcuts": None,  # no --shortcuts
    }


def test_no_tokens_bins_are_not_counted(tmp_path: Path) -> None:
    path = write_rows(tmp_path / "ok.parquet", [make_row(1)])
    assert validate_file(path, tokens=False).summary.by_bin == {"not counted": {"3": 1}}


def test_missing_column_is_a_file_level_schema_error(tmp_path: Path) -> None:
    schema = pa.schema([f for f in MRCR_SCHEMA if f.name != "n_chars"])
    rows = [{k: v for k, v in make_row(s).items() if k != "n_chars"} for s in range(3)]
    report = validate_file(write_rows(tmp_path / "m.parquet", rows, schema=schema), tokens=False)
    assert [(f.row, f.check, f.severity) for f in report.findings] == [(None, "schema", "error")]
    assert "n_chars" in report.findings[0].message
    assert report.exit_code == 1


def test_wrong_column_type_and_extra_column(tmp_path: Path) -> None:
    fields = [pa.field("n_needles", pa.string()) if f.name == "n_needles" else f for f in MRCR_SCHEMA]
    schema = pa.schema([*fields, pa.field("note", pa.string())])
    rows = [{**make_row(s), "n_needles": "3", "note": "x"} for s in range(2)]
    report = validate_file(write_rows(tmp_path / "t.parquet", rows, schema=schema), tokens=False)
    found = sorted((f.row is None, f.check, f.severity, f.message) for f in report.findings)
    assert found == [
        (True, "schema", "error", "column 'n_needles' has type string, expected int64"),
        (True, "schema", "warning", "extra column 'note'"),
    ]


def test_narrower_int_type_is_a_warning(tmp_path: Path) -> None:
    schema = pa.schema([pa.field(f.name, pa.int32()) if f.name == "n_chars" else f for f in MRCR_SCHEMA])
    report = validate_file(write_rows(tmp_path / "t.parquet", [make_row(1)], schema=schema), tokens=False)
    assert [(f.check, f.severity) for f in report.findings] == [("schema", "warning")]
    assert report.exit_code == 0


def _unreadable(tmp_path: Path) -> dict[str, Path]:
    good = write_rows(tmp_path / "good.parquet", [make_row(s) for s in range(3)])
    data = good.read_bytes()
    truncated = tmp_path / "truncated.parquet"
    truncated.write_bytes(data[: len(data) // 2])
    empty = tmp_path / "empty.parquet"
    empty.write_bytes(b"")
    text = tmp_path / "notes.parquet"
    text.write_text("prompt,answer\nhello,world\n")
    return {"truncated": truncated, "empty": empty, "not parquet": text}


@pytest.mark.parametrize("kind", ["truncated", "empty", "not parquet"])
def test_unreadable_file_is_a_file_finding_and_does_not_stop_others(tmp_path: Path, kind: str) -> None:
    bad = _unreadable(tmp_path)[kind]
    other = write_rows(tmp_path / "other.parquet", [make_row(9)])
    report = validate_paths([bad, other], tokens=False)
    assert [(f.file, f.row, f.check, f.severity) for f in report.findings] == [(str(bad), None, "file", "error")]
    assert "\n" not in report.findings[0].message
    assert report.summary.rows == 1  # the other file was still checked
    assert report.exit_code == 2


def test_zero_row_parquet_is_bad_input(tmp_path: Path) -> None:
    report = validate_file(write_rows(tmp_path / "none.parquet", []), tokens=False)
    assert [(f.check, f.message) for f in report.findings] == [("file", "holds no rows")]
    assert report.summary.rows == 0 and report.exit_code == 2


def test_directories_and_globs(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    one = write_rows(tmp_path / "a" / "one.parquet", [make_row(1)])
    two = write_rows(tmp_path / "a" / "b" / "two.parquet", [make_row(2)])
    (tmp_path / "a" / "readme.txt").write_text("not data")
    files, problems = expand_paths([tmp_path / "a"])
    assert files == sorted([one, two]) and problems == []
    files, problems = expand_paths([str(tmp_path / "a" / "**" / "*.parquet")])
    assert sorted(files) == sorted([one, two])
    files, problems = expand_paths([str(tmp_path / "*.nothing"), tmp_path / "missing.parquet", one, one])
    assert files == [one] and [p.check for p in problems] == ["file", "file"]
    assert validate_paths([tmp_path / "a"], tokens=False).summary.files == 2


def test_streaming_uses_small_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_parquet_rows, "BATCH_BYTES", 1)
    rows = [make_row(s) for s in range(5)]
    rows[3] = MUTATIONS["n_chars_off"][0](rows[3])
    path = write_rows(tmp_path / "s.parquet", rows, row_group_size=2)
    sizes = [batch.num_rows for _, batch, _ in _files.iter_validate([path], spec=SPEC, tokens=False, workers=1)]
    assert sizes == [1, 1, 1, 1, 1]
    assert [f.row for f in validate_file(path, tokens=False).findings] == [3]


def test_process_pool_gives_the_same_report_in_row_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_files, "POOL_MIN_BYTES", 0)
    rows = [make_row(s, filler=400) for s in range(7)]
    rows[2] = MUTATIONS["answer_other_needle"][0](rows[2])
    rows[5] = MUTATIONS["extra_needle"][0](rows[5])
    path = write_rows(tmp_path / "p.parquet", rows)
    serial = validate_file(path, workers=1)
    parallel = validate_file(path, workers=2)
    assert parallel == serial
    assert [f.row for f in parallel.findings] == [2, 5]


@pytest.mark.skipif(not REAL.exists(), reason="real rows folder absent")
def test_real_rows_validate_clean_with_token_recount() -> None:
    report = validate_file(REAL, workers=2)
    assert report.findings == []
    assert report.summary.by_bin == {"(131072, 262144]": {"2": 1, "4": 1, "8": 1}}


@pytest.mark.skipif(not REAL.exists(), reason="real rows folder absent")
def test_real_row_token_counts() -> None:
    import pyarrow.parquet as pq

    from mrcr_gen.recipes.openai_mrcr._checks import check_row

    counts = [check_row(r).n_tokens for r in pq.read_table(REAL).to_pylist()]
    assert counts == [146743, 148284, 144134]


def test_units_gather_whole_row_groups(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pyarrow.parquet as pq

    rows = [make_row(s, filler=200) for s in range(10)]
    grouped = write_rows(tmp_path / "g.parquet", rows, row_group_size=2)
    single = write_rows(tmp_path / "s.parquet", rows, row_group_size=10)
    meta = pq.ParquetFile(grouped).metadata
    sizes = [meta.row_group(g).total_byte_size for g in range(meta.num_row_groups)]
    target = max(a + b for a, b in zip(sizes, sizes[1:]))  # any two neighbouring groups fit
    monkeypatch.setattr(_files, "MIN_UNIT_BYTES", target)
    monkeypatch.setattr(_files, "UNIT_BYTES", target)
    units = _files.plan_units(meta, workers=2)
    assert [first for first, _ in units] == [sum(n for _, n in units[:i]) for i in range(len(units))]
    assert sum(n for _, n in units) == 10 and all(first % 2 == 0 and n % 2 == 0 for first, n in units)
    assert all(sum(sizes[first // 2 : (first + n) // 2]) <= target for first, n in units)
    assert len(units) < 5  # groups were gathered
    assert _files.plan_units(pq.ParquetFile(single).metadata, workers=3) == [(0, 10)]  # never split


def test_a_file_written_as_one_huge_row_group_is_checked_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_files, "POOL_MIN_BYTES", 0)
    monkeypatch.setattr(_files, "HUGE_ROW_GROUP_BYTES", 1000)
    rows = [make_row(s, filler=100) for s in range(6)]
    rows[3] = MUTATIONS["extra_needle"][0](rows[3])
    path = write_rows(tmp_path / "one.parquet", rows, row_group_size=6)
    started = []
    monkeypatch.setattr(_files, "LocalEngine", lambda *a, **k: started.append(a) or pytest.fail("no pool for it"))
    report = validate_file(path, workers=2, tokens=False)
    assert [f.row for f in report.findings] == [3] and started == []


@pytest.mark.parametrize("row_group_size", [1, 3, 10])
def test_any_worker_count_and_layout_gives_the_same_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, row_group_size: int) -> None:
    monkeypatch.setattr(_files, "POOL_MIN_BYTES", 0)
    monkeypatch.setattr(_files, "MIN_UNIT_BYTES", 1)
    rows = [make_row(s, filler=100) for s in range(10)]
    rows[0] = MUTATIONS["answer_other_needle"][0](rows[0])
    rows[6] = MUTATIONS["extra_needle"][0](rows[6])
    rows[9] = MUTATIONS["n_chars_off"][0](rows[9])
    path = write_rows(tmp_path / "p.parquet", rows, row_group_size=row_group_size)
    serial = validate_file(path, workers=1, tokens=False)
    assert [f.row for f in serial.findings] == [0, 6, 9]
    for workers in (2, 3):
        assert validate_file(path, workers=workers, tokens=False) == serial
        batches = list(_files.iter_validate([path], spec=SPEC, workers=workers, tokens=False))
        assert [r.row for _, _, results in batches for r in results] == list(range(10))
        assert all(batch.num_rows == len(results) for _, batch, results in batches)


def test_read_range_reads_only_the_rows_asked_for(tmp_path: Path) -> None:
    rows = [make_row(s) for s in range(7)]
    path = write_rows(tmp_path / "r.parquet", rows, row_group_size=3)
    for first, count in [(0, 7), (2, 3), (3, 3), (5, 10), (7, 1)]:
        got = [r["answer"] for b in _parquet_rows.read_range(path, first, count) for r in b.to_pylist()]
        assert got == [r["answer"] for r in rows[first : first + count]]


def test_workers_are_chosen_from_the_data_size() -> None:
    per = _files.BYTES_PER_WORKER
    assert _files.choose_workers(per // 2, cores=8) == 1
    assert _files.choose_workers(3 * per, cores=8) == 3
    assert _files.choose_workers(100 * per, cores=8) == 8
    assert _files.choose_workers(100 * per, tokens=False, cores=8) == 1


def test_missing_answer_column_is_one_file_level_finding_and_no_token_claim(tmp_path: Path) -> None:
    schema = pa.schema([f for f in MRCR_SCHEMA if f.name != "answer"])
    rows = [{k: v for k, v in make_row(s).items() if k != "answer"} for s in range(3)]
    report = validate_file(write_rows(tmp_path / "a.parquet", rows, schema=schema), workers=1)
    assert [(f.row, f.check, f.severity) for f in report.findings] == [(None, "schema", "error")]
    assert report.findings[0].message == "column 'answer' is missing"
    assert report.summary.by_bin == {"not counted": {"3": 3}}


@pytest.mark.skipif(not REAL.exists(), reason="real rows folder absent")
def test_needle_ask_put_into_a_real_writing_is_caught() -> None:
    import json

    import pyarrow.parquet as pq

    from mrcr_gen.recipes.openai_mrcr._checks import check_row

    row = pq.read_table(REAL).to_pylist()[1]
    messages = json.loads(row["prompt"])
    ask = messages[row["desired_msg_index"]]["content"]
    messages[10]["content"] += f"\n\nUser: {ask}"
    bad = {**row, "prompt": json.dumps(messages), "n_chars": row["n_chars"] + len(ask) + 8}
    findings = check_row(bad, count_tokens=False).findings
    assert [(f.check, "messages[10] (a writing)" in f.message) for f in findings] == [("needle_ask_elsewhere", True)]
