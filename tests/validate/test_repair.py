"""--clean and --fix: good rows kept, recoverable rows rewritten, input untouched, schema kept."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mrcr_gen import MRCR_SCHEMA, validate_file, validate_paths
from mrcr_gen.recipes.openai_mrcr._repair import fix_record
from mrcr_gen.recipes.openai_mrcr._validate import repair
from mrcr_gen.validate import _files, _parquet_rows
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


def _mixed_inputs(tmp_path: Path) -> dict[str, Path]:
    """Files of different column sets and orders, a file-level schema error and an unreadable file."""
    root = tmp_path / "in"
    (root / "sub").mkdir(parents=True)
    plain = [make_row(s) for s in range(3)]
    plain[1] = MUTATIONS["extra_needle"][0](plain[1])
    extra = pa.schema([*MRCR_SCHEMA, pa.field("note", pa.string())])
    noted = [{**make_row(10 + s), "note": f"n{s}"} for s in range(3)]
    noted[2] = MUTATIONS["index_other_needle"][0](noted[2])
    reordered = pa.schema(list(reversed(MRCR_SCHEMA)))
    backwards = [make_row(20 + s) for s in range(4)]
    backwards[0] = MUTATIONS["malformed_ask"][0](backwards[0])  # a warning: kept unless strict
    backwards[3] = MUTATIONS["broken_json"][0](backwards[3])
    missing = pa.schema([f for f in MRCR_SCHEMA if f.name != "n_chars"])
    junk = root / "junk.parquet"
    junk.write_text("not parquet")
    return {
        "plain": write_rows(root / "plain.parquet", plain),
        "noted": write_rows(root / "sub" / "noted.parquet", noted, schema=extra),
        "backwards": write_rows(root / "backwards.parquet", backwards, schema=reordered),
        "missing": write_rows(root / "missing.parquet", [{k: v for k, v in make_row(30 + s).items() if k != "n_chars"} for s in range(2)], schema=missing),
        "junk": junk,
    }


def test_several_inputs_go_to_their_own_files_with_their_own_columns(tmp_path: Path) -> None:
    inputs = _mixed_inputs(tmp_path)
    out = tmp_path / "out"
    result = repair([tmp_path / "in"], out, mode="fix", tokens=False)
    by_input = {Path(f.input).name: f for f in result.files}
    assert {name: (f.kept, f.fixed, f.dropped) for name, f in by_input.items()} == {
        "backwards.parquet": (3, 0, 1),
        "junk.parquet": (0, 0, 0),
        "missing.parquet": (0, 0, 2),
        "plain.parquet": (2, 0, 1),
        "noted.parquet": (2, 1, 0),
    }
    assert (result.kept, result.fixed, result.dropped) == (7, 1, 4)
    for name, relative in (("plain", "plain.parquet"), ("noted", "sub/noted.parquet"), ("backwards", "backwards.parquet")):
        written = pq.read_table(out / relative)
        assert written.schema.equals(pq.read_schema(inputs[name]), check_metadata=False)
        assert by_input[relative.split("/")[-1]].output == str(out / relative)
    assert pq.read_table(out / "sub" / "noted.parquet").column("note").to_pylist() == ["n0", "n1", "n2"]
    assert not (out / "missing.parquet").exists() and not (out / "junk.parquet").exists()
    assert by_input["missing.parquet"].output is None
    # Every dropped row is listed with its check.
    assert f"{inputs['plain']}:1: dropped (needle_count)" in result.changes
    assert f"{inputs['backwards']}:3: dropped (prompt_json)" in result.changes
    assert any(line.startswith(f"{inputs['missing']}:0-1: dropped, every row (schema: ") for line in result.changes)
    assert any(line.startswith(f"{inputs['junk']}: not written (file: ") for line in result.changes)
    assert validate_paths([out], tokens=False).exit_code == 0


def test_strict_clean_drops_rows_with_warnings(tmp_path: Path) -> None:
    inputs = _mixed_inputs(tmp_path)
    result = repair([inputs["backwards"]], tmp_path / "strict.parquet", mode="clean", tokens=False, strict=True)
    assert [(f.kept, f.fixed, f.dropped) for f in result.files] == [(2, 0, 2)]
    assert f"{inputs['backwards']}:0: dropped (ask_form)" in result.changes
    assert validate_paths([tmp_path / "strict.parquet"], tokens=False, strict=True).exit_code == 0


def test_one_input_into_an_existing_folder_keeps_its_name(tmp_path: Path) -> None:
    path, _ = _dataset(tmp_path)
    (tmp_path / "folder").mkdir()
    result = repair([path], tmp_path / "folder", tokens=False)
    assert [f.output for f in result.files] == [str(tmp_path / "folder" / "in.parquet")]
    assert pq.read_table(tmp_path / "folder" / "in.parquet").num_rows == 3


def test_several_inputs_need_a_folder(tmp_path: Path) -> None:
    inputs = _mixed_inputs(tmp_path)
    (tmp_path / "taken.parquet").write_text("")
    with pytest.raises(ValueError, match="is a file, but with 2 input files the output is a folder"):
        repair([inputs["plain"], inputs["noted"]], tmp_path / "taken.parquet", tokens=False)


def test_an_all_dropped_file_still_gets_its_empty_output(tmp_path: Path) -> None:
    rows = [MUTATIONS["extra_needle"][0](make_row(s)) for s in range(2)]
    path = write_rows(tmp_path / "bad.parquet", rows)
    result = repair([path], tmp_path / "bad-clean.parquet", tokens=False)
    assert [(f.kept, f.dropped) for f in result.files] == [(0, 2)]
    assert pq.read_table(tmp_path / "bad-clean.parquet").num_rows == 0
    assert [line.split(": ", 1)[1] for line in result.changes] == ["dropped (needle_count)"] * 2


def test_an_interrupted_repair_leaves_only_complete_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_parquet_rows, "BATCH_BYTES", 1)  # one row per batch: stop with a file half-written
    inputs = _mixed_inputs(tmp_path)
    out = tmp_path / "out"
    batches: list[str] = []

    def stop_in_the_second_file(file: str, done: int, total: int) -> None:
        batches.append(file)
        if batches.count(str(inputs["plain"])) == 2:
            assert len(list(out.glob(".plain.parquet.*.partial"))) == 1
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        repair([inputs["backwards"], inputs["plain"]], out, tokens=False, workers=1, progress=stop_in_the_second_file)
    assert sorted(p.name for p in out.rglob("*")) == ["backwards.parquet"]
    assert pq.read_table(out / "backwards.parquet").num_rows == 3


def test_the_same_file_twice_is_refused(tmp_path: Path) -> None:
    inputs = _mixed_inputs(tmp_path)
    (tmp_path / "link.parquet").symlink_to(inputs["plain"])
    with pytest.raises(ValueError, match="named twice"):
        repair([inputs["plain"], tmp_path / "link.parquet"], tmp_path / "out", tokens=False)


def test_an_existing_output_is_never_overwritten(tmp_path: Path) -> None:
    """Issue 33 item 4: --clean/--fix write new files only: an output file that exists (ours from a
    previous run, or anybody's) is refused before anything is written, in a folder output too."""
    path, _ = _dataset(tmp_path)
    (tmp_path / "out.parquet").write_bytes(b"not ours")
    refusal = r"refusing to overwrite .*out.parquet: --clean and --fix write new files only"
    with pytest.raises(ValueError, match=refusal):
        repair([path], tmp_path / "out.parquet", mode="fix", tokens=False)
    assert (tmp_path / "out.parquet").read_bytes() == b"not ours"
    (tmp_path / "more").mkdir()
    second = write_rows(tmp_path / "more" / "in.parquet", [make_row(9, n_needles=2)])
    (tmp_path / "folder" / "more").mkdir(parents=True)
    (tmp_path / "folder" / "more" / "in.parquet").write_bytes(b"not ours")
    with pytest.raises(ValueError, match="refusing to overwrite"):
        repair([path, second], tmp_path / "folder", mode="clean", tokens=False)
    assert sorted(p.relative_to(tmp_path / "folder").as_posix() for p in (tmp_path / "folder").rglob("*")) == [
        "more",
        "more/in.parquet",
    ]
