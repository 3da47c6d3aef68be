"""--clean and --fix: good rows kept, recoverable rows rewritten, input untouched, schema kept."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mrcr_gen import MRCR_SCHEMA, validate_file
from mrcr_gen.validate import repair
from mrcr_gen.validate._repair import fix_record
from tests.support.rowkit import MUTATIONS, make_row, write_rows


def _dataset(tmp_path: Path) -> tuple[Path, list[dict]]:
    rows = [make_row(s, n_needles=3) for s in range(8)]
    originals = list(rows)
    rows[1] = MUTATIONS["answer_other_needle"][0](rows[1])  # fixable
    rows[2] = MUTATIONS["index_other_needle"][0](rows[2])  # fixable
    rows[3] = MUTATIONS["extra_needle"][0](rows[3])  # not fixable: needle count
    rows[4] = MUTATIONS["broken_json"][0](rows[4])  # not fixable
    rows[5] = MUTATIONS["near_duplicate"][0](rows[5])  # warning only: kept
    rows[6] = MUTATIONS["prefix_removed"][0](rows[6])  # fixable
    return write_rows(tmp_path / "in.parquet", rows), originals


def test_clean_keeps_rows_without_errors(tmp_path: Path) -> None:
    path, _ = _dataset(tmp_path)
    before = path.read_bytes()
    result = repair([path], tmp_path / "out.parquet", mode="clean", tokens=False)
    assert path.read_bytes() == before
    table = pq.read_table(tmp_path / "out.parquet")
    assert table.schema == MRCR_SCHEMA
    assert (result.kept, result.fixed, result.dropped) == (3, 0, 5)
    assert table.num_rows == 3
    assert validate_file(tmp_path / "out.parquet", tokens=False).exit_code == 0


def test_fix_rewrites_recoverable_rows(tmp_path: Path) -> None:
    path, originals = _dataset(tmp_path)
    result = repair([path], tmp_path / "fixed.parquet", mode="fix", tokens=False)
    assert (result.kept, result.fixed, result.dropped) == (3, 3, 2)
    rows = pq.read_table(tmp_path / "fixed.parquet").to_pylist()
    assert len(rows) == 6
    by_prompt = {r["prompt"]: r for r in rows}
    for i in (1, 2, 6):
        assert by_prompt[originals[i]["prompt"]] == originals[i]
    assert any("fixed" in line and "desired_msg_index" in line for line in result.changes)
    assert any(line.startswith(f"{path}:3: dropped (needle_count)") for line in result.changes)
    assert validate_file(tmp_path / "fixed.parquet", tokens=False).exit_code == 0


def test_fix_refuses_ambiguous_rows() -> None:
    row = make_row(3, n_needles=3)
    assert fix_record(MUTATIONS["extra_needle"][0](MUTATIONS["answer_other_needle"][0](row))) is None
    assert fix_record(MUTATIONS["random_string_mismatch"][0](row)) is None
    assert fix_record(MUTATIONS["duplicate_response"][0](MUTATIONS["index_other_needle"][0](row))) is None
    fixed, notes = fix_record(MUTATIONS["index_other_needle"][0](row))
    assert fixed == row and notes


def test_repair_keeps_the_input_schema(tmp_path: Path) -> None:
    schema = pa.schema([*MRCR_SCHEMA, pa.field("note", pa.string())])
    rows = [{**make_row(s), "note": f"n{s}"} for s in range(3)]
    rows[0] = MUTATIONS["index_other_needle"][0](rows[0])
    path = write_rows(tmp_path / "x.parquet", rows, schema=schema)
    repair([path], tmp_path / "y.parquet", mode="fix", tokens=False)
    table = pq.read_table(tmp_path / "y.parquet")
    assert table.schema == schema and table.column("note").to_pylist() == ["n0", "n1", "n2"]


def test_output_may_not_be_an_input(tmp_path: Path) -> None:
    path, _ = _dataset(tmp_path)
    with pytest.raises(ValueError):
        repair([path], path, tokens=False)
