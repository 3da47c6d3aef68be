"""A resumed `mrcr-eval` reports exactly what a fresh run of the same command reports; the summary
and exit code describe the rows the command selects; one run at a time writes a run folder."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from mrcr_gen import run_eval
from mrcr_gen.cli._eval import eval_main
from mrcr_gen.eval import EvalConfig
from mrcr_gen.eval._runner import resolve_inputs
from tests.support.chat_server import ChatServer, Fault, oracle
from tests.support.tiny_tokenizer import write_tiny_tokenizer

from .conftest import API_KEY


def config(data, out, server, **kwargs) -> EvalConfig:
    return EvalConfig(data=[str(p) for p in data], model="test-model", out=str(out), base_url=server.base_url, **kwargs)


# What a summary reports of the rows (not the latencies of this invocation's requests).
REPORTED = (
    "data",
    "complete",
    "mean_score",
    "mean_score_answered",
    "mean_score_lenient",
    "auc_128k",
    "auc_1m",
    "mean_128k",
    "mean_1m",
    "n_rows",
    "n_scored",
    "cells",
    "bins",
    "by_needles",
    "replies",
    "skipped",
    "errors",
    "file_errors",
    "usage",
)


def reported(summary: dict) -> dict:
    return {key: summary[key] for key in REPORTED}


def call(args, capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        eval_main([str(a) for a in args])
    captured = capsys.readouterr()
    return info.value.code, captured.out, captured.err


@pytest.fixture(scope="module")
def tiny_spec(tmp_path_factory) -> str:
    return f"hf:{write_tiny_tokenizer(tmp_path_factory.mktemp('tiny-tokenizer'))}"


# ------------------------------------------------------------------ item 2: resume == fresh


def test_a_narrower_window_on_resume_skips_what_a_fresh_run_skips_and_sends_nothing(
    small_data, gen_data, tmp_path, api_key
):
    data = [small_data, gen_data]
    resumed_dir = tmp_path / "resumed"
    with ChatServer("oracle") as server:
        run_eval(config(data, resumed_dir, server))
        assert server.total_requests == 18
        _, resumed = run_eval(config(data, resumed_dir, server, max_context_window=4096))
        assert server.total_requests == 18  # every row has its reply already
        _, fresh = run_eval(config(data, tmp_path / "fresh", server, max_context_window=4096))
        assert fresh["skipped"]["count"] == 5 and fresh["n_rows"] == 13
        assert reported(resumed) == reported(fresh)
        # Widened again: the replies stored before the narrow run count again, still nothing is sent.
        before = server.total_requests
        _, widened = run_eval(config(data, resumed_dir, server))
        _, fresh_wide = run_eval(config(data, tmp_path / "fresh-wide", server))
        assert server.total_requests - before == 18  # the fresh run only
    assert reported(widened) == reported(fresh_wide) and widened["n_rows"] == 18


def test_a_skip_counted_another_way_is_recounted_on_resume(small_data, gen_data, tmp_path, api_key):
    """Skipped by the o200k count first, then resumed with --count-with-server: the server counts
    fewer tokens, so rows the o200k count skipped now fit and are sent, as a fresh run sends them."""
    data = [small_data, gen_data]
    resumed_dir = tmp_path / "resumed"
    with ChatServer("oracle") as server:
        _, first = run_eval(config(data, resumed_dir, server, max_context_window=5000))
        assert first["skipped"]["count"] == 5 and server.total_requests == 13
        _, resumed = run_eval(config(data, resumed_dir, server, max_context_window=5000, count_with_server=True))
        sent_on_resume = server.total_requests - 13
        _, fresh = run_eval(config(data, tmp_path / "fresh", server, max_context_window=5000, count_with_server=True))
    # Exactly the rows that fit by the server's count and not by o200k's are sent on resume (how
    # many depends on the offline writer's text: some, not all).
    assert 0 < fresh["skipped"]["count"] < 5
    assert sent_on_resume == 5 - fresh["skipped"]["count"]
    assert reported(resumed) == reported(fresh)


def test_another_tokenizer_on_resume_rebins_and_recounts_without_sending(
    small_data, gen_data, tmp_path, api_key, tiny_spec
):
    """Answered under o200k; resumed with --tokenizer (which bins the rows and counts the window):
    the rows are binned and skipped as that tokenizer counts them, and no reply is asked again."""
    data = [small_data, gen_data]
    resumed_dir = tmp_path / "resumed"
    with ChatServer("oracle") as server:
        run_eval(config(data, resumed_dir, server, max_context_window=16000))
        assert server.total_requests == 18
        _, resumed = run_eval(config(data, resumed_dir, server, max_context_window=16000, tokenizer_spec=tiny_spec))
        assert server.total_requests == 18
        _, fresh = run_eval(
            config(data, tmp_path / "fresh", server, max_context_window=16000, tokenizer_spec=tiny_spec)
        )
    # The tiny tokenizer counts more than o200k: rows answered under o200k are now skipped (how
    # many depends on the offline writer's text) and rebinned.
    assert fresh["skipped"]["count"] > 0 and {c["bin"] for c in fresh["cells"]} != {"[4096, 8192]"}
    assert reported(resumed) == reported(fresh)


# ------------------------------------------------------- item 4: the summary is the command's


def test_a_rerun_naming_another_file_reports_and_exits_on_that_file_only(
    small_data, gen_data, tmp_path, capsys, api_key
):
    out = tmp_path / "run"
    doomed = {"on": True}

    def faults(number, body):
        return Fault.server_error() if doomed["on"] and number == 1 else None

    with ChatServer("oracle", faults) as server:
        common = ["--model", "test-model", "--base-url", server.base_url, "--out", out, "--max-retries", "0", "-c", "1"]
        code, _, err = call([small_data, *common], capsys)
        assert code == 1 and "1 rows failed" in err
        code, stdout, err = call([gen_data, *common], capsys)
        assert code == 0, err
        summary = json.loads((out / "summary.json").read_text())
        gen_file = resolve_inputs([gen_data])[0]
        assert summary["n_rows"] == 6 and summary["complete"] and summary["errors"]["count"] == 0
        assert [entry["path"] for entry in summary["data"]] == [gen_file]
        assert "over 6 rows" in stdout.replace("\n", " ")
        code, stdout, _ = call(["report", out], capsys)  # the report describes the same command
        assert code == 0 and "over 6 rows" in stdout.replace("\n", " ")
        # The first file's rows stayed in the folder: naming it again sends only its failed row.
        doomed["on"] = False
        before = server.total_requests
        code, _, err = call([small_data, *common], capsys)
        assert code == 0, err
        assert server.total_requests - before == 1
    assert json.loads((out / "summary.json").read_text())["n_rows"] == 12


def test_a_rerun_with_other_filters_reports_the_rows_they_select(small_data, tmp_path, api_key):
    out = tmp_path / "run"
    with ChatServer("oracle") as server:
        _, first = run_eval(config([small_data], out, server, needles=[2]))
        assert first["n_rows"] == 4
        _, second = run_eval(config([small_data], out, server, needles=[4], limit=3))
        assert server.total_requests == 4 + 3
        _, fresh = run_eval(config([small_data], tmp_path / "fresh", server, needles=[4], limit=3))
    assert {c["n_needles"] for c in second["cells"]} == {4} and second["n_rows"] == 3
    assert reported(second) == reported(fresh)


# --------------------------------------------------------------- item 5: one run per folder


def test_a_second_run_on_a_busy_folder_exits_2_naming_the_running_one(small_data, tmp_path, capsys, api_key):
    from mrcr_gen._files import exclusive_lock

    out = tmp_path / "run"
    out.mkdir()
    with ChatServer("oracle") as server:
        with exclusive_lock(out / "run.lock", "held by the test"):
            code, _, err = call(
                [small_data, "--model", "test-model", "--base-url", server.base_url, "--out", out], capsys
            )
        assert server.total_requests == 0
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert f"is in use by another run (pid {os.getpid()} on " in err
    assert not (out / "results.jsonl").exists()


def test_two_overlapping_runs_send_each_row_once_and_a_killed_run_does_not_block(small_data, tmp_path):
    out = tmp_path / "run"
    env = dict(os.environ, OPENAI_API_KEY=API_KEY, PYTHONPATH=os.getcwd())
    # The first run's replies wait until the second run has been refused: it holds the folder
    # however slowly a loaded machine starts the second (a fixed delay raced with that start).
    second_done = threading.Event()

    def held_oracle(messages, body):
        second_done.wait(timeout=300)
        return oracle(messages, body)

    with ChatServer(held_oracle) as server:
        command = [
            sys.executable,
            "-c",
            "from mrcr_gen.cli import eval_main; eval_main()",
            str(small_data),
            "--model",
            "test-model",
            "--base-url",
            server.base_url,
            "--out",
            str(out),
            "-c",
            "1",
            "--quiet",
        ]
        first = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while server.total_requests == 0 and time.monotonic() < deadline:
                time.sleep(0.02)
            second = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
            assert second.returncode == 2
            assert second.stderr.strip().count("\n") == 0
            assert f"is in use by another run (pid {first.pid} on " in second.stderr
            first.send_signal(signal.SIGKILL)  # its lock dies with it: the next run is not blocked
            first.wait()
        finally:
            second_done.set()
            if first.poll() is None:
                first.kill()
                first.wait()
        third = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
        assert third.returncode == 0, third.stderr
        assert len(server.per_last_user) == 12
        assert server.total_requests <= 12 + 1  # at most the killed run's request in flight went twice
    assert json.loads((out / "summary.json").read_text())["n_scored"] == 12


def test_a_file_read_in_full_on_rerun_no_longer_reports_its_old_file_error(small_data, tmp_path, api_key, monkeypatch):
    """A read that failed once (the same bytes: a network share that dropped) is a file error of
    that run only: the rerun that reads the file reports what a fresh run reports."""
    from mrcr_gen.eval import _planner
    from mrcr_gen.eval._items import FileError

    real = _planner.read_items
    failing = {"on": True}

    def read_items(path, **kwargs):
        if failing["on"]:
            raise FileError(f"{path}: cannot read (transient)")
        yield from real(path, **kwargs)

    monkeypatch.setattr(_planner, "read_items", read_items)
    out = tmp_path / "run"
    with ChatServer("oracle") as server:
        _, first = run_eval(config([small_data], out, server))
        assert first["file_errors"] and not first["complete"]
        failing["on"] = False
        _, again = run_eval(config([small_data], out, server))
        _, fresh = run_eval(config([small_data], tmp_path / "fresh", server))
    assert again["file_errors"] == [] and again["complete"]
    assert reported(again) == reported(fresh)
