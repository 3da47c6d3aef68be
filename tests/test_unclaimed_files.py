"""A file no recipe claims gets one line and exit 2 from every command, before any output is written."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mrcr_gen.cli import gen_main
from mrcr_gen.cli._eval import eval_main
from mrcr_gen.cli._grade import grade_main
from mrcr_gen.cli._validate import validate_main

MESSAGE = "not a file of any known recipe: columns a, b"


@pytest.fixture
def unrelated(tmp_path: Path) -> Path:
    path = tmp_path / "unrelated.parquet"
    pq.write_table(pa.table({"a": [1, 2], "b": ["x", "y"]}), path)
    return path


def _refused(main, args: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    out, err = capsys.readouterr()
    assert exit_info.value.code == 2, err
    assert out == "" and len(err.strip().splitlines()) == 1, err
    return err.strip()


def test_every_command_refuses_an_unclaimed_file_in_one_line(unrelated: Path, tmp_path: Path, capsys) -> None:
    responses = tmp_path / "responses.jsonl"
    responses.write_text('{"row": 0, "response": "x"}\n')
    commands = [
        (validate_main, [str(unrelated)]),
        (validate_main, [str(unrelated.parent)]),  # found in a folder: refused too, never skipped
        (validate_main, [str(unrelated), "--clean", "--out", str(tmp_path / "clean")]),
        (eval_main, [str(unrelated), "-m", "gpt-4o", "-o", str(tmp_path / "run"), "--base-url", "http://127.0.0.1:9"]),
        (grade_main, [str(unrelated), str(responses)]),
        (gen_main, ["pool", "harvest", str(unrelated), "--out", str(tmp_path / "pool.parquet")]),
    ]
    for main, args in commands:
        line = _refused(main, args, capsys)
        assert line.endswith(f"{unrelated}: {MESSAGE}"), line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["responses.jsonl", "unrelated.parquet"]


def test_a_file_two_recipes_claim_names_both(tmp_path: Path, capsys) -> None:
    path = tmp_path / "both.parquet"
    pq.write_table(pa.table({n: ["x"] for n in ("prompt", "random_string_to_prepend", "queries", "answer")}), path)
    line = _refused(validate_main, [str(path)], capsys)
    assert line == f"mrcr-validate: error: {path}: claimed by more than one recipe (openai-mrcr and mrcr-v2); " + (
        "it cannot be told which reads it"
    )
