"""mrcr-grade and mrcr-eval as users run them, including SIGKILL and resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from mrcr_gen import iter_rows
from mrcr_gen.cli._eval import eval_main
from mrcr_gen.cli._grade import grade_main
from mrcr_gen.recipes.openai_mrcr._grade import grade
from tests.support.chat_server import ChatServer, oracle

from .conftest import API_KEY


def call(main, args, capsys):
    with pytest.raises(SystemExit) as info:
        main(args)
    captured = capsys.readouterr()
    return info.value.code, captured.out, captured.err


def write_responses(path: Path, items) -> Path:
    path.write_text("".join(json.dumps(item) + "\n" for item in items))
    return path


def oracle_responses(data) -> list[dict]:
    return [{"row": i, "response": oracle(json.loads(r.prompt), {})} for i, r in enumerate(iter_rows(data))]


# ----------------------------------------------------------------------- mrcr-grade


def test_grade_cli_json_and_table(small_data, tmp_path, capsys):
    items = oracle_responses(small_data)
    items[0]["response"] = "wrong"
    responses = write_responses(tmp_path / "r.jsonl", items)
    code, out, _ = call(grade_main, [str(small_data), str(responses), "--json"], capsys)
    assert code == 0
    result = json.loads(out)
    assert len(result["rows"]) == 12 and result["mean"] == pytest.approx(11 / 12)
    first = result["rows"][0]
    assert {k: first[k] for k in ("row", "score", "bin", "n_needles")} == {
        "row": 0, "score": 0.0, "bin": "<4096", "n_needles": 2
    }
    assert (first["analysis"]["prefix"], first["analysis"]["returned"]) == ("missing", "not_in_context")
    assert set(result["rows"][1]) == {"row", "score", "bin", "n_needles", "analysis"}
    assert all(r["analysis"]["returned"] == "target" and r["analysis"]["match_ratio"] == 1.0 for r in result["rows"][1:])
    shares = {(c["n_needles"], c["count"]): c["shares"] for c in result["failures"]["outcomes"]}
    assert shares[(2, 4)]["target"] == 0.75 and shares[(2, 4)]["not_in_context"] == 0.25
    code, out, _ = call(grade_main, [str(small_data), str(responses)], capsys)
    assert code == 0 and "0.9167" in out and "8 needles" in out


def test_grade_cli_scores_match_grader(gen_data, tmp_path, capsys):
    rows = list(iter_rows(gen_data))
    items = [{"row": i, "response": r.random_string_to_prepend + "some text"} for i, r in enumerate(rows)]
    code, out, _ = call(grade_main, [str(gen_data), str(write_responses(tmp_path / "r.jsonl", items)), "--json"], capsys)
    assert code == 0
    for record, row, item in zip(json.loads(out)["rows"], rows, items):
        assert record["score"] == grade(item["response"], row.answer, row.random_string_to_prepend)
        assert record["bin"] == "[4096, 8192]"


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda items: items[:-1], "no response for 1 of 12 rows: 11"),
        (lambda items: items + [{"row": 12, "response": "x"}], "rows that DATA lacks"),
        (lambda items: items + [{"row": 3, "response": "x"}], "row 3 has a second response"),
        (lambda items: items[:2] + ["not json"] + items[2:], "r.jsonl:3: not valid JSON"),
        # json.loads raises a plain ValueError (no .msg) for an integer past Python's digit limit.
        (lambda items: items[:2] + ['{"row": ' + "9" * 5000 + "}"] + items[2:], "r.jsonl:3: not valid JSON"),
        (lambda items: items[:2] + [{"row": "2", "response": "x"}] + items[3:], 'r.jsonl:3: "row" must be'),
        (lambda items: [{"row": 0}] + items[1:], 'r.jsonl:1: expected an object with "row" and "response"'),
    ],
    ids=["missing", "extra", "duplicate", "bad-json", "huge-integer", "bad-row", "no-response"],
)
def test_grade_cli_bad_input_is_one_line_exit_2(small_data, tmp_path, capsys, mutate, message):
    items = mutate(oracle_responses(small_data))
    path = tmp_path / "r.jsonl"
    path.write_text("".join((item if isinstance(item, str) else json.dumps(item)) + "\n" for item in items))
    code, out, err = call(grade_main, [str(small_data), str(path)], capsys)
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1 and err.startswith("mrcr-grade: error:")


def test_grade_cli_allow_missing_and_missing_file(small_data, tmp_path, capsys):
    items = oracle_responses(small_data)[:4]
    path = write_responses(tmp_path / "r.jsonl", items)
    code, out, _ = call(grade_main, [str(small_data), str(path), "--allow-missing", "--json"], capsys)
    assert code == 0 and json.loads(out)["mean"] == 1.0 and len(json.loads(out)["missing"]) == 8
    code, _, err = call(grade_main, [str(tmp_path / "nope.parquet"), str(path)], capsys)
    assert code == 2 and "file not found" in err


# ----------------------------------------------------------------------- mrcr-eval


def test_eval_cli_and_report_subcommand(small_data, tmp_path, capsys, api_key):
    out = tmp_path / "run"
    with ChatServer("oracle") as server:
        code, stdout, _ = call(
            eval_main,
            [str(small_data), "--model", "test-model", "--base-url", server.base_url, "--out", str(out), "--concurrency", "2",
             "--needles", "2", "--needles", "8", "--temperature", "0", "--max-output-tokens", "100", "--max-tokens-field", "max_tokens"],
            capsys,
        )
        assert code == 0
        assert server.total_requests == 8
        assert all(b["temperature"] == 0 and b["max_tokens"] == 100 for b in server.requests)
    assert "1.000" in stdout and "needle floor" in stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["mean_score"] == 1.0 and {c["n_needles"] for c in summary["cells"]} == {2, 8}
    (out / "plot.png").unlink()
    code, stdout, _ = call(eval_main, ["report", str(out)], capsys)
    assert code == 0 and (out / "plot.png").is_file() and "mean score 1.000 [1.000, 1.000] over 8 rows" in stdout.replace("\n", " ")


@pytest.mark.parametrize(
    "args, message",
    [
        (["--model", "m", "--out", "OUT", "--bin", "1000"], "no bin has upper edge 1000"),
        (["--model", "m", "--out", "OUT", "--max-tokens-field", "tokens"], "max_tokens_field"),
        (["--out", "OUT"], "--model"),
        (["--model", "m", "--out", "OUT", "--extra-body", "{not json"], "--extra-body: not valid JSON"),
        (["--model", "m", "--out", "OUT", "--extra-body", "[1]"], "--extra-body: expected a JSON object"),
    ],
)
def test_eval_cli_bad_options(small_data, tmp_path, capsys, api_key, args, message):
    args = [str(small_data)] + [str(tmp_path / "o") if a == "OUT" else a for a in args]
    code, _, err = call(eval_main, args, capsys)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_eval_cli_missing_data_and_no_key(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    code, _, err = call(eval_main, [str(tmp_path / "x.parquet"), "--model", "m", "--out", str(tmp_path / "o")], capsys)
    assert code == 2 and "x.parquet: no such file or directory" in err
    code, _, err = call(eval_main, [str(tmp_path), "--model", "m", "--out", str(tmp_path / "o")], capsys)
    assert code == 2 and "directory holds no *.parquet file" in err


def test_eval_cli_takes_directories_and_globs(small_data, tmp_path, capsys, api_key):
    with ChatServer("oracle") as server:
        for data in (str(small_data.parent), str(small_data.parent / "*.parquet")):
            out = tmp_path / f"run{server.total_requests}"
            code, _, _ = call(eval_main, [data, "--model", "m", "--base-url", server.base_url, "--out", str(out)], capsys)
            assert code == 0
            assert json.loads((out / "summary.json").read_text())["mean_score"] == 1.0
        assert server.total_requests == 2 * len(list(iter_rows(small_data)))


def test_eval_cli_no_key_without_base_url(small_data, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    code, _, err = call(eval_main, [str(small_data), "--model", "m", "--out", str(tmp_path / "o")], capsys)
    assert code == 2 and "OPENAI_API_KEY" in err


def test_report_of_a_non_run_dir(tmp_path, capsys):
    code, _, err = call(eval_main, ["report", str(tmp_path)], capsys)
    assert code == 2 and "not a mrcr-eval run directory" in err
    (tmp_path / "results.jsonl").write_text("")
    (tmp_path / "run.json").write_text("{not json")
    code, _, err = call(eval_main, ["report", str(tmp_path)], capsys)
    assert code == 2 and "run.json is not valid JSON" in err and len(err.strip().splitlines()) == 1


def _bad_data(tmp_path: Path, defect: str) -> Path:
    """A data file whose row 1 (or the whole file) has `defect`; row 0 is fine."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from mrcr_gen import MRCR_SCHEMA
    from tests.support.rowkit import make_row

    path = tmp_path / f"{defect}.parquet"
    if defect == "not-parquet":
        path.write_text("hello")
        return path
    good, bad = make_row(seed=1), make_row(seed=2)
    if defect == "prompt-not-json":
        bad["prompt"] = "not json"
    elif defect == "prompt-not-messages":
        bad["prompt"] = json.dumps([1, 2, 3])
    elif defect == "answer-without-prefix":
        bad["answer"] = "no prefix"
    pq.write_table(pa.Table.from_pylist([good, bad], schema=MRCR_SCHEMA), path)
    return path


@pytest.mark.parametrize(
    "defect, message",
    [
        ("not-parquet", "not-parquet.parquet: cannot read as parquet"),
        ("prompt-not-json", "row 1: prompt_json: prompt is not valid JSON"),
        ("prompt-not-messages", "row 1: prompt_json: messages[0] is a int, expected an object"),
    ],
)
def test_grade_of_an_ungradable_row_is_one_line_exit_2(tmp_path, capsys, defect, message):
    data = _bad_data(tmp_path, defect)
    responses = write_responses(tmp_path / "r.jsonl", [{"row": 0, "response": "x"}, {"row": 1, "response": "y"}])
    code, _, err = call(grade_main, [str(data), str(responses)], capsys)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize(
    "defect, check",
    [("prompt-not-json", "prompt_json"), ("prompt-not-messages", "prompt_json")],
)
def test_eval_records_an_ungradable_row_as_an_error_and_scores_the_others(tmp_path, capsys, api_key, defect, check):
    data = _bad_data(tmp_path, defect)
    out = tmp_path / "o"
    with ChatServer("oracle") as server:
        code, _, err = call(eval_main, [str(data), "--model", "m", "--base-url", server.base_url, "--out", str(out), "--quiet"], capsys)
        assert server.total_requests == 1
    assert code == 1 and "1 rows failed" in err and len(err.strip().splitlines()) == 1
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_scored"] == 1 and summary["errors"]["rows"][0]["check"] == check and not summary["complete"]


def test_answer_without_prefix_is_graded_as_the_official_loop_does(tmp_path, capsys, api_key):
    data = _bad_data(tmp_path, "answer-without-prefix")
    responses = write_responses(tmp_path / "r.jsonl", [{"row": 0, "response": "x"}, {"row": 1, "response": "y"}])
    code, out, _ = call(grade_main, [str(data), str(responses), "--json"], capsys)
    assert code == 0 and [r["score"] for r in json.loads(out)["rows"]] == [0.0, 0.0]
    with ChatServer("oracle") as server:
        code, _, _ = call(eval_main, [str(data), "--model", "m", "--base-url", server.base_url, "--out", str(tmp_path / "o")], capsys)
        assert code == 0 and server.total_requests == 2


def test_eval_of_an_unreadable_file_is_one_line_exit_2(tmp_path, capsys, api_key):
    data = _bad_data(tmp_path, "not-parquet")
    with ChatServer("oracle") as server:
        code, _, err = call(eval_main, [str(data), "--model", "m", "--base-url", server.base_url, "--out", str(tmp_path / "o")], capsys)
        assert server.total_requests == 0
    last = err.strip().splitlines()[-1]  # after the report: the one-line error
    assert code == 2 and last.startswith("mrcr-eval: error: ") and "not-parquet.parquet: cannot read as parquet" in last, err


def _stats(port: int) -> dict:
    return json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/stats"))


def test_sigkill_then_resume_repeats_no_finished_call(small_data, tmp_path):
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.support.chat_server", "--port", "0", "--policy", "oracle", "--delay", "0.4"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        port = int(server.stdout.readline().split()[1])
        out = tmp_path / "run"
        env = dict(os.environ, OPENAI_API_KEY=API_KEY)
        command = [sys.executable, "-c", "from mrcr_gen.cli import eval_main; eval_main()", str(small_data),
                   "--model", "test-model", "--base-url", f"http://127.0.0.1:{port}/v1", "--out", str(out),
                   "--concurrency", "2", "--quiet"]
        client = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        results = out / "results.jsonl"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if results.exists() and len(results.read_text().splitlines()) >= 4:
                break
            time.sleep(0.02)
        client.send_signal(signal.SIGKILL)
        client.wait()
        assert client.returncode == -signal.SIGKILL
        done_before = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
        assert 4 <= len(done_before) < 12
        sent_before = _stats(port)["total_requests"]
        assert sent_before <= len(done_before) + 2  # at most `concurrency` calls were in flight
        from mrcr_gen import summarize_run as summarize

        assert not summarize(out)["complete"]  # the killed run never finished

        finished = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
        assert finished.returncode == 0, finished.stderr
        stats = _stats(port)
        rows = list(iter_rows(small_data))
        for record in done_before:
            query = json.loads(rows[record["row"]].prompt)[-1]["content"]
            assert stats["per_last_user"][query] == 1, "a finished row was sent again"
        assert len(stats["per_last_user"]) == 12
        assert stats["total_requests"] == 12 + (sent_before - len(done_before))
        summary = json.loads((out / "summary.json").read_text())
        assert summary["n_scored"] == 12 and summary["mean_score"] == 1.0
        assert API_KEY not in finished.stdout + finished.stderr
        for path in out.iterdir():
            assert API_KEY.encode() not in path.read_bytes()
    finally:
        server.kill()
        server.wait()


def test_eval_cli_out_that_is_a_file_is_one_line_exit_2(small_data, tmp_path, capsys, api_key):
    blocker = tmp_path / "taken"
    blocker.write_text("not a directory")
    with ChatServer("oracle") as server:
        code, _, err = call(eval_main, [str(small_data), "--model", "m", "--base-url", server.base_url, "--out", str(blocker)], capsys)
        assert server.total_requests == 0
    assert code == 2 and "cannot write the run directory" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("name", ["results.jsonl", "summary.json", "plot.png", "run.lock", "batches"])
def test_eval_into_a_folder_holding_a_file_we_did_not_write_is_refused(small_data, tmp_path, capsys, api_key, name):
    """Issue 33 item 4: a folder without our run.json that holds a file a run writes (someone's
    results.jsonl, summary.json, ...): one line naming it, exit 2, nothing sent or written."""
    out = tmp_path / "run"
    out.mkdir()
    foreign = out / name
    foreign.mkdir() if name == "batches" else foreign.write_text("not ours\n")
    with ChatServer("oracle") as server:
        args = [str(small_data), "--model", "m", "--base-url", server.base_url, "--out", str(out)]
        code, stdout, err = call(eval_main, args, capsys)
        assert server.total_requests == 0
    assert (code, stdout) == (2, "")
    assert err == (
        f"mrcr-eval: error: refusing to overwrite {foreign}: mrcr-gen did not write it; "
        "it is not a run folder of mrcr-eval; choose another --out\n"
    )
    assert sorted(p.name for p in out.iterdir()) == [name]


def test_a_run_killed_before_its_run_json_leaves_a_lock_the_next_run_takes(small_data, tmp_path, capsys, api_key):
    out = tmp_path / "run"
    out.mkdir()
    (out / "run.lock").write_text('{"pid": 1, "host": "h", "started": "2026-12-04T00:00:00+0000"}\n')
    with ChatServer("oracle") as server:
        args = [str(small_data), "--model", "m", "--base-url", server.base_url, "--out", str(out), "--needles", "2"]
        code, _, err = call(eval_main, args, capsys)
    assert code == 0, err
