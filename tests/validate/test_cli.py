"""`mrcr-validate`: exit codes, JSON on stdout, one-line errors, directories and globs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from mrcr_gen.cli._validate import validate_main
from tests.support.rowkit import MUTATIONS, make_row, write_rows


def run(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        validate_main([*map(str, args)])
    out, err = capsys.readouterr()
    return exc.value.code, out, err


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    good = write_rows(tmp_path / "data" / "good.parquet", [make_row(s, filler=400) for s in range(3)]) if (tmp_path / "data").mkdir() is None else None
    rows = [make_row(s, filler=400) for s in range(3, 6)]  # other rows than good's: no duplicate prompt
    rows[1] = MUTATIONS["answer_distractor"][0](rows[1])
    bad = write_rows(tmp_path / "data" / "bad.parquet", rows)
    junk = tmp_path / "junk.parquet"
    junk.write_text("not parquet at all")
    return {"good": good, "bad": bad, "junk": junk, "dir": tmp_path / "data"}


def test_exit_0_on_clean_file(capsys, files) -> None:
    code, out, _ = run(capsys, files["good"], "--no-tokens")
    assert code == 0 and "rows checked" in out


def test_exit_1_and_json_on_stdout(capsys, files) -> None:
    code, out, err = run(capsys, files["bad"], "--no-tokens", "--json", "-")
    assert code == 1
    report = json.loads(out)
    assert set(report) == {"summary", "findings"}
    assert set(report["summary"]) == {"files", "rows", "rows_with_errors", "by_check", "by_bin", "tokenizers", "hub_sources"}
    assert report["summary"]["tokenizers"] == {} and report["summary"]["hub_sources"] == {}  # --no-tokens, local files
    assert report["summary"]["by_check"] == {"ground_truth": 1}
    assert report["findings"][0]["row"] == 1 and report["findings"][0]["check"] == "ground_truth"
    assert "rows checked" in err  # tables go to stderr


def test_exit_2_unreadable_file_one_line(capsys, files) -> None:
    code, out, err = run(capsys, files["junk"], files["good"], "--no-tokens", "--json", "-", "--quiet")
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("mrcr-validate: error: ") and str(files["junk"]) in err
    assert "Traceback" not in err
    report = json.loads(out)
    assert report["summary"]["rows"] == 3
    assert report["findings"][0]["row"] is None and report["findings"][0]["check"] == "file"


@pytest.mark.parametrize(
    "args",
    [["--bogus"], [], ["--workers", "0", "x.parquet"], ["--clean", "a.parquet", "--fix", "b.parquet", "x.parquet"]],
)
def test_usage_errors_exit_2_with_one_line(capsys, files, args) -> None:
    if args and args[-1] == "x.parquet":
        args = [*args[:-1], str(files["good"])]
    code, out, err = run(capsys, *args)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("mrcr-validate: error: ")


def test_directory_and_glob_inputs(capsys, files) -> None:
    code, out, _ = run(capsys, files["dir"], "--no-tokens", "--json", "-")
    assert code == 1 and json.loads(out)["summary"]["files"] == 2
    code, out, _ = run(capsys, str(files["dir"] / "g*.parquet"), "--no-tokens", "--json", "-")
    assert code == 0 and json.loads(out)["summary"]["files"] == 1


def test_json_to_file_and_fix(capsys, files, tmp_path) -> None:
    code, _, err = run(
        capsys, files["bad"], "--no-tokens", "--json", tmp_path / "r.json", "--fix", tmp_path / "fixed.parquet"
    )
    assert code == 1
    assert json.loads((tmp_path / "r.json").read_text())["summary"]["rows_with_errors"] == 1
    assert "fixed:" in err
    assert pq.read_table(tmp_path / "fixed.parquet").num_rows == 3
    code, _, _ = run(capsys, tmp_path / "fixed.parquet", "--no-tokens")
    assert code == 0


def test_console_script_pipes_json(files) -> None:
    script = Path(sys.executable).with_name("mrcr-validate")
    command = [str(script)] if script.exists() else [sys.executable, "-c", "from mrcr_gen.cli import validate_main; validate_main()"]
    done = subprocess.run([*command, str(files["bad"]), "--json", "-", "--workers", "2"], capture_output=True, text=True)
    assert done.returncode == 1
    assert json.loads(done.stdout)["summary"]["rows_with_errors"] == 1
    assert "Traceback" not in done.stderr


def test_strict_counts_warnings_as_errors(capsys, tmp_path) -> None:
    rows = [make_row(s, filler=400) for s in range(3)]
    rows[2] = MUTATIONS["malformed_ask"][0](rows[2])
    path = write_rows(tmp_path / "warned.parquet", rows)
    code, out, _ = run(capsys, path, "--no-tokens", "--json", "-")
    assert code == 0 and json.loads(out)["summary"]["rows_with_errors"] == 0
    code, out, _ = run(capsys, path, "--no-tokens", "--json", "-", "--strict")
    report = json.loads(out)
    assert code == 1 and report["summary"]["rows_with_errors"] == 1
    assert [(f["row"], f["check"], f["severity"]) for f in report["findings"]] == [(2, "ask_form", "error")]


def test_clean_several_inputs_into_a_folder_lists_every_drop(capsys, files, tmp_path) -> None:
    out = tmp_path / "cleaned"
    code, out_text, err = run(capsys, files["dir"], "--no-tokens", "--clean", out)
    assert code == 1
    assert sorted(p.name for p in out.iterdir()) == ["bad.parquet", "good.parquet"]
    assert pq.read_table(out / "bad.parquet").num_rows == 2 and pq.read_table(out / "good.parquet").num_rows == 3
    assert f"{files['bad']}:1: dropped (ground_truth)" in err
    flat = " ".join(out_text.split())
    assert "cleaned: rows per file" in flat and f"cleaned: wrote 5 rows to {out} (5 kept, 0 fixed, 1 dropped)" in flat
    code, _, err = run(capsys, files["dir"], "--no-tokens", "--clean", files["good"])
    assert code == 2 and "output is a folder" in err and err.count("\n") == 1


def test_fix_into_an_existing_file_is_one_line_exit_2_and_writes_nothing(capsys, files, tmp_path) -> None:
    """Issue 33 item 4: the output is never overwritten, whoever wrote it."""
    out = tmp_path / "fixed.parquet"
    out.write_bytes(b"somebody's")
    code, stdout, err = run(capsys, files["bad"], "--no-tokens", "--fix", out)
    assert code == 2 and stdout == ""
    assert err == (
        f"mrcr-validate: error: refusing to overwrite {out}: --clean and --fix write new files only; "
        "remove it or choose another output\n"
    )
    assert out.read_bytes() == b"somebody's"
