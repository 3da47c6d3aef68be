"""The runner end to end against the real test server."""

from __future__ import annotations

import asyncio
import json

import pytest

from mrcr_gen import iter_rows, run_eval, run_eval_async, write_report
from mrcr_gen import summarize_run as summarize
from mrcr_gen.eval import EvalConfig, EvalError
from mrcr_gen.eval._runner import resolve_inputs
from mrcr_gen.recipes.openai_mrcr._grade import grade
from tests.support.chat_server import ChatServer, Fault, first_needle

from .conftest import API_KEY


def config(data, out, server, **kwargs) -> EvalConfig:
    return EvalConfig(data=[str(p) for p in data], model="test-model", out=str(out), base_url=server.base_url, **kwargs)


def results(out) -> list[dict]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def test_oracle_scores_exactly_one_on_generated_rows(gen_data, tmp_path, api_key):
    with ChatServer("oracle") as server:
        stats, summary = run_eval(config([gen_data], tmp_path / "run", server, concurrency=3))
    rows = list(iter_rows(gen_data))
    assert stats.scored == len(rows) == server.total_requests
    assert summary["mean_score"] == 1.0
    assert summary["n_scored"] == len(rows)
    assert {c["n_needles"] for c in summary["cells"]} == {2, 4, 8}
    assert all(c["bin"] == "[4096, 8192]" for c in summary["cells"])
    # The exact rows were sent as-is, the ask wording untouched.
    sent = {b["messages"][-1]["content"]: b["messages"] for b in server.requests}
    for row in rows:
        messages = json.loads(row.prompt)
        assert sent[messages[-1]["content"]] == messages
    # Floors: guessing a needle or a writing scores less than retrieval.
    for cell in summary["cells"]:
        assert cell["floor_random_writing"] < 1.0
        assert cell["floor_random_needle"] < 1.0
    assert (tmp_path / "run" / "summary.json").is_file()
    assert (tmp_path / "run" / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((tmp_path / "run" / "summary.json").read_text()) == summary


def test_first_needle_scores_equal_the_grader(small_data, tmp_path, api_key):
    with ChatServer("first_needle") as server:
        run_eval(config([small_data], tmp_path / "run", server))
    records = {r["row"]: r for r in results(tmp_path / "run")}
    rows = list(iter_rows(small_data))
    assert len(records) == len(rows)
    first_scores = []
    for index, row in enumerate(rows):
        messages = json.loads(row.prompt)
        expected_response = first_needle(messages, {})
        assert records[index]["response"] == expected_response
        assert records[index]["score"] == grade(expected_response, row.answer, row.random_string_to_prepend)
        first_scores.append(records[index]["score"])
    assert 1.0 in first_scores and min(first_scores) < 1.0  # some rows ask for the 1st, some don't
    summary = summarize(tmp_path / "run")
    assert summary["mean_score"] == pytest.approx(sum(first_scores) / len(first_scores))


def test_no_prefix_scores_zero(small_data, tmp_path, api_key):
    with ChatServer("no_prefix") as server:
        _, summary = run_eval(config([small_data], tmp_path / "run", server))
    assert summary["mean_score"] == 0.0
    assert all(r["score"] == 0.0 and r["score_lenient"] == 0.0 for r in results(tmp_path / "run"))


def test_transport_failures_are_retried_and_all_rows_score(small_data, tmp_path, api_key):
    schedule = {1: Fault.rate_limit(0), 2: Fault.server_error(), 3: Fault.malformed(), 4: Fault.slow(0.3), 7: Fault.rate_limit(0)}
    with ChatServer("oracle", schedule) as server:
        stats, summary = run_eval(config([small_data], tmp_path / "run", server, concurrency=2))
        assert server.faults_served == {"429": 2, "500": 1, "malformed": 1, "slow": 1}
    assert summary["mean_score"] == 1.0 and summary["errors"]["count"] == 0 and summary["complete"]
    assert stats.scored == 12
    attempts = sum(r["attempts"] for r in results(tmp_path / "run"))
    assert attempts == 12 + 4  # four failures cost a retry; the slow reply only time


@pytest.mark.parametrize("kind", ["empty", "null"])
def test_empty_reply_scores_zero_counts_in_the_mean_and_is_not_retried(small_data, tmp_path, api_key, kind):
    with ChatServer("oracle", {2: Fault(kind)}) as server:
        stats, summary = run_eval(config([small_data], tmp_path / "run", server, concurrency=1, limit=4))
        assert server.total_requests == 4  # the empty reply was not sent again
    assert summary["mean_score"] == 0.75 and summary["mean_score_answered"] == 0.75
    assert summary["n_scored"] == 4 and summary["errors"]["count"] == 0 and summary["complete"]
    assert summary["replies"]["empty"] == 1 and summary["replies"]["null_content"] == (kind == "null")
    empty = [r for r in results(tmp_path / "run") if r["response"] == ""]
    assert len(empty) == 1 and empty[0]["score"] == 0.0 and empty[0]["attempts"] == 1


def test_persistent_errors_count_zero_make_the_run_incomplete_and_are_retried_on_resume(small_data, tmp_path, api_key):
    queries = [json.loads(r.prompt)[-1]["content"] for r in iter_rows(small_data)]
    doomed = {queries[1], queries[5]}
    broken = {"on": True}

    def faults(number, body):
        return Fault.server_error() if broken["on"] and body["messages"][-1]["content"] in doomed else None

    with ChatServer("oracle", faults) as server:
        cfg = config([small_data], tmp_path / "run", server, max_retries=1)
        stats, summary = run_eval(cfg)
        assert stats.errors == 2 and stats.scored == 10
        assert summary["errors"]["count"] == 2 and summary["n_scored"] == 10 and summary["n_rows"] == 12
        assert summary["mean_score"] == pytest.approx(10 / 12) and summary["mean_score_answered"] == 1.0
        assert not summary["complete"]
        assert {e["row"] for e in summary["errors"]["rows"]} == {1, 5}
        assert all("HTTP 500" in e["error"] and API_KEY not in e["error"] for e in summary["errors"]["rows"])
        # Resume: only the two failed rows are sent again.
        broken["on"] = False
        before = server.total_requests
        stats, summary = run_eval(cfg)
        assert server.total_requests - before == 2
        assert stats.resumed == 10 and stats.scored == 2
        assert summary["errors"]["count"] == 0 and summary["mean_score"] == 1.0 and summary["complete"]


def test_resume_does_not_repeat_calls(small_data, tmp_path, api_key):
    with ChatServer("oracle") as server:
        cfg = config([small_data], tmp_path / "run", server, limit=5)
        run_eval(cfg)
        assert server.total_requests == 5
        stats, summary = run_eval(cfg.model_copy(update={"limit": None}))
        assert server.total_requests == 12
        assert stats.resumed == 5 and stats.scored == 7
        run_eval(cfg.model_copy(update={"limit": None}))
        assert server.total_requests == 12
        assert len(server.per_last_user) == 12 and set(server.per_last_user.values()) == {1}
    assert summary["n_scored"] == 12


def test_torn_last_line_is_ignored_on_resume(small_data, tmp_path, api_key):
    with ChatServer("oracle") as server:
        cfg = config([small_data], tmp_path / "run", server, limit=3)
        run_eval(cfg)
        with open(tmp_path / "run" / "results.jsonl", "a") as handle:
            handle.write('{"file": "x", "row": 3, "sta')  # a write cut by SIGKILL
        stats, summary = run_eval(cfg.model_copy(update={"limit": 4}))
        assert server.total_requests == 4 and summary["n_scored"] == 4
    lines = (tmp_path / "run" / "results.jsonl").read_text().splitlines()
    assert len(lines) == 5 and json.loads(lines[-1])["row"] == 3


def test_line_torn_inside_a_multibyte_character_is_ignored_on_resume(small_data, tmp_path, api_key):
    with ChatServer("oracle") as server:
        cfg = config([small_data], tmp_path / "run", server, limit=2)
        run_eval(cfg)
        with open(tmp_path / "run" / "results.jsonl", "ab") as handle:
            handle.write('{"file": "x", "row": 2, "response": "caf\u00e9'.encode()[:-1])
        _, summary = run_eval(cfg.model_copy(update={"limit": 3}))
        assert server.total_requests == 3 and summary["n_scored"] == 3


def test_concurrency_is_bounded(small_data, tmp_path, api_key):
    with ChatServer("oracle", delay=0.2) as server:
        stats, _ = run_eval(config([small_data], tmp_path / "run", server, concurrency=3))
        assert server.max_in_flight == 3
        assert stats.max_in_flight == 3
    with ChatServer("oracle", delay=0.05) as server:
        run_eval(config([small_data], tmp_path / "run1", server, concurrency=1))
        assert server.max_in_flight == 1


def test_filters_and_context_window(small_data, gen_data, tmp_path, api_key):
    with ChatServer("oracle") as server:
        _, summary = run_eval(config([small_data, gen_data], tmp_path / "a", server, needles=[4]))
        assert server.total_requests == 4 + 2
        assert {c["n_needles"] for c in summary["cells"]} == {4}
        server.reset()
        _, summary = run_eval(config([small_data, gen_data], tmp_path / "b", server, bins=[8192]))
        assert server.total_requests == 6 and {c["bin"] for c in summary["cells"]} == {"[4096, 8192]"}
        server.reset()
        _, summary = run_eval(config([small_data, gen_data], tmp_path / "c", server, limit=13))
        assert server.total_requests == 13
        records = results(tmp_path / "c")
        # The limit takes rows in file order: all of the first file's, then the second file's row 0.
        # Records are written as grades end, which need not be the order the rows were sent in.
        generated = resolve_inputs([gen_data])[0]
        assert len({(r["file"], r["row"]) for r in records}) == 13
        assert [r["row"] for r in records if r["file"] == generated] == [0]
        # The seed's rule: prompt-only o200k tokens above the window are skipped and counted.
        server.reset()
        _, summary = run_eval(config([small_data, gen_data], tmp_path / "d", server, max_context_window=4096))
        skipped = [r for r in results(tmp_path / "d") if r["status"] == "skipped"]
        assert summary["skipped"]["count"] == len(skipped) > 0
        assert all(r["o200k_prompt_tokens"] > 4096 for r in skipped)
        assert summary["n_scored"] + len(skipped) == 18 == summary["n_scored"] + summary["skipped"]["count"]
        assert server.total_requests == summary["n_scored"]


def test_run_dir_of_another_model_is_refused(small_data, tmp_path, api_key):
    with ChatServer("oracle") as server:
        run_eval(config([small_data], tmp_path / "run", server, limit=1))
        other = config([small_data], tmp_path / "run", server).model_copy(update={"model": "other"})
        with pytest.raises(EvalError, match="model: \"test-model\" -> \"other\""):
            asyncio.run(run_eval_async(other))
        assert server.total_requests == 1


def test_key_never_stored(small_data, tmp_path, api_key):
    with ChatServer("oracle") as server:
        run_eval(config([small_data], tmp_path / "run", server, limit=2))
        assert server.authorizations == [f"Bearer {API_KEY}"] * 2
        assert API_KEY not in json.dumps(server.requests)
    for path in (tmp_path / "run").iterdir():
        assert API_KEY.encode() not in path.read_bytes(), path


def test_report_rewrites_summary_and_plot(small_data, tmp_path, api_key):
    with ChatServer("oracle") as server:
        run_eval(config([small_data], tmp_path / "run", server))
    (tmp_path / "run" / "summary.json").unlink()
    (tmp_path / "run" / "plot.png").unlink()
    summary = write_report(tmp_path / "run")
    assert summary["mean_score"] == 1.0
    assert (tmp_path / "run" / "plot.png").stat().st_size > 1000
    cell = summary["cells"][0]
    assert set(cell) >= {"bin", "n_needles", "count", "mean_score", "floor_random_needle", "floor_random_writing"}


def test_a_reply_that_utf8_cannot_hold_is_stored_escaped_never_lost(small_data, tmp_path, api_key):
    """A lone surrogate is valid JSON ("\\ud83d") but not UTF-8: the row is stored (escaped, reading
    back as the same text), scored and counted; nothing is dropped and the run completes."""
    from tests.support.chat_server import oracle

    def policy(messages, body):
        return oracle(messages, body) + "\ud83d"

    with ChatServer(policy) as server:
        stats, summary = run_eval(config([small_data], tmp_path / "run", server, concurrency=3))
        sent = server.total_requests
    rows = list(iter_rows(small_data))
    records = results(tmp_path / "run")
    assert len(records) == len(rows) == sent == stats.scored == summary["n_rows"] and summary["complete"]
    assert all(r["status"] == "ok" and r["response"].endswith("\ud83d") for r in records)


def test_a_task_that_crashes_is_observed_and_the_others_are_recorded(small_data, tmp_path, api_key, monkeypatch):
    """An unexpected exception inside one row's task stops the run and is raised; the replies in
    flight beside it are still recorded, and the run is not marked finished."""
    from mrcr_gen.eval import _planner, _session

    real = _planner.scored_record
    calls = {"n": 0}

    def scored_record(item, recipe, result, strip_think):
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("grader bug")
        return real(item, recipe, result, strip_think)

    monkeypatch.setattr(_session, "scored_record", scored_record)
    with ChatServer("oracle") as server, pytest.raises(RuntimeError, match="grader bug"):
        asyncio.run(run_eval_async(config([small_data], tmp_path / "run", server, concurrency=3)))
    records = results(tmp_path / "run")
    assert len(records) == calls["n"] - 1 >= 1  # every reply but the one that crashed is on disk
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run.get("finished") is not True
