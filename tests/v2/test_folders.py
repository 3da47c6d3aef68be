"""mrcr-validate, mrcr-eval and mrcr-grade given a folder: its MRCR v2 CSV files are picked up,
other CSV files (no `queries` and `answer` columns) left alone."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mrcr_gen.cli._eval import eval_main
from mrcr_gen.cli._grade import grade_main
from mrcr_gen.cli._validate import validate_main
from mrcr_gen.recipes import group_inputs
from mrcr_gen.recipes.mrcr_v2 import iter_records
from tests.support.chat_server import ChatServer


@pytest.fixture()
def folder(v2_data, tmp_path) -> Path:
    copy = tmp_path / "data"
    shutil.copytree(v2_data, copy)
    (copy / "notes.csv").write_text("queries_sent,answers\n1,2\n", encoding="utf-8")
    (copy / "4needle" / "scores.csv").write_text("row,score\n0,1.0\n", encoding="utf-8")
    return copy


def run(main, args: list[str]) -> int:
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    return exit_info.value.code


def test_a_folder_gives_its_v2_csv_files_only(folder):
    groups = group_inputs([folder])
    assert [recipe.name for recipe, _ in groups] == ["mrcr-v2"]
    v2 = [Path(p) for p in groups[0][1]]
    assert [p.relative_to(folder) for p in v2] == sorted(p.relative_to(folder) for p in folder.rglob("mrcr_v2_*.csv"))
    assert len(v2) == 4


def test_validate_a_folder(folder, tmp_path):
    assert run(validate_main, [str(folder), "--json", str(tmp_path / "r.json"), "--quiet"]) == 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["summary"]["files"] == 4 and report["summary"]["rows"] == 24 and report["findings"] == []


def test_eval_and_grade_a_folder(folder, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-v2")
    with ChatServer("oracle") as server:
        code = run(eval_main, [str(folder), "--model", "m", "--base-url", server.base_url, "--out", str(tmp_path / "run")])
    assert code == 0
    records = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines() if line]
    assert len(records) == 24 and {r["score"] for r in records} == {1.0}
    assert {Path(r["file"]).name for r in records} == {p.name for p in folder.rglob("mrcr_v2_*.csv")}

    one = tmp_path / "one"
    one.mkdir()
    data = next(folder.rglob("mrcr_v2_*.csv"))
    shutil.copy(data, one)
    (one / "notes.csv").write_text("a,b\n1,2\n", encoding="utf-8")
    responses = tmp_path / "responses.jsonl"
    responses.write_text("".join(json.dumps({"row": i, "response": r["answer"]}) + "\n" for i, r in enumerate(iter_records(data))))
    capsys.readouterr()
    assert run(grade_main, [str(one), str(responses), "--json"]) == 0
    graded = json.loads(capsys.readouterr().out)
    assert graded["mean"] == 1.0 and graded["n_rows"] == 6
    assert run(grade_main, [str(folder), str(responses)]) == 2  # four files: it grades one


def test_a_generated_folder_loads_with_datasets_per_needle_count(v2_data, tmp_path):
    import os
    import subprocess
    import sys

    probe = (
        "import json, sys, datasets\n"
        "d = datasets.load_dataset(sys.argv[1], '4needle', split='train')\n"
        "print(json.dumps({'columns': d.column_names, 'answers': list(d['answer'])}))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_"))}
    env |= {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf-home")}
    done = subprocess.run([sys.executable, "-c", probe, str(v2_data)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    from mrcr_gen.recipes.mrcr_v2 import V2_COLUMNS

    assert loaded["columns"] == list(V2_COLUMNS)
    assert loaded["answers"] == [r["answer"] for f in sorted((v2_data / "4needle").glob("*.csv")) for r in iter_records(f)]
