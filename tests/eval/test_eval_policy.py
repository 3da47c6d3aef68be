"""Issue 8: fatal answers, resume by content and settings, bad rows, reasoning options, cost."""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mrcr_gen import MRCR_SCHEMA, iter_rows, run_eval, run_eval_async
from mrcr_gen import summarize_run as summarize
from mrcr_gen._ownership import FileSignature
from mrcr_gen.cli._eval import eval_main
from mrcr_gen.eval import EvalConfig, EvalError, EvalFatal
from mrcr_gen.eval import _chat
from tests.support.chat_server import CACHED_TOKENS, REASONING_TOKENS, ChatServer, Fault
from tests.support.rowkit import make_row

from .test_eval_cli import call
from .test_eval_runner import config, results


def queries(path) -> list[str]:
    return [json.loads(r.prompt)[-1]["content"] for r in iter_rows(path)]


# ----------------------------------------------------------------------- fatal answers


@pytest.mark.parametrize("kind, status", [("401", 401), ("404", 404), ("403", 403), ("unknown_model", 400)])
def test_fatal_answer_stops_after_at_most_concurrency_requests(small_data, tmp_path, capsys, api_key, kind, status):
    out = tmp_path / "run"
    with ChatServer("oracle", lambda n, body: Fault(kind), delay=0.2) as server:
        code, _, err = call(
            eval_main,
            [str(small_data), "--model", "test-model", "--base-url", server.base_url, "--out", str(out), "--concurrency", "3"],
            capsys,
        )
        sent = server.total_requests
    assert code == 2
    assert 1 <= sent <= 3
    lines = err.strip().splitlines()
    assert len(lines) == 1 and f"HTTP {status}: " in lines[0] and API_KEY_NOT_IN(lines[0])
    # Every request that was sent is recorded (in flight were awaited), and a rerun retries them.
    records = results(out)
    assert len(records) == sent and all(r["status"] == "error" and r["check"] == "fatal" for r in records)
    summary = json.loads((out / "summary.json").read_text())
    assert not summary["complete"] and summary["mean_score"] == 0.0


def API_KEY_NOT_IN(text: str) -> bool:
    from .conftest import API_KEY

    return API_KEY not in text


def test_in_flight_replies_are_recorded_after_a_fatal_answer(small_data, tmp_path, api_key):
    # Request 1 is refused at once; requests 2 and 3 were already in flight and are answered.
    refusing = {"on": True}
    faults = lambda n, body: None if not refusing["on"] else Fault("401") if n == 1 else Fault.slow(0.3)  # noqa: E731
    with ChatServer("oracle", faults, delay=0.2) as server:
        with pytest.raises(EvalFatal, match="HTTP 401"):
            asyncio.run(run_eval_async(config([small_data], tmp_path / "run", server, concurrency=3)))
        assert server.total_requests == 3
        records = results(tmp_path / "run")
        assert sorted(r["status"] for r in records) == ["error", "ok", "ok"]
        refusing["on"] = False
        _, summary = run_eval(config([small_data], tmp_path / "run", server))
        assert server.total_requests == 3 + 12 - 2  # the refused row and the unsent ones
    assert summary["complete"] and summary["mean_score"] == 1.0


def test_prompt_too_long_is_a_row_error_not_retried(small_data, tmp_path, capsys, api_key):
    long_query = queries(small_data)[3]
    out = tmp_path / "run"
    faults = lambda n, body: Fault("too_long") if body["messages"][-1]["content"] == long_query else None  # noqa: E731
    with ChatServer("oracle", faults) as server:
        code, _, err = call(eval_main, [str(small_data), "--model", "test-model", "--base-url", server.base_url,
                                        "--out", str(out), "--quiet"], capsys)
        assert server.total_requests == 12
    assert code == 1 and "1 rows failed" in err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["errors"]["by_check"] == {"prompt_too_long": 1} and summary["errors"]["rows"][0]["row"] == 3
    assert summary["mean_score"] == pytest.approx(11 / 12) and summary["mean_score_answered"] == 1.0


# ----------------------------------------------------------------------- resume keys


def test_regenerated_row_is_sent_again_and_its_old_result_no_longer_counts(tmp_path, api_key):
    data = tmp_path / "data.parquet"
    rows = [make_row(seed=s) for s in range(4)]
    pq.write_table(pa.Table.from_pylist(rows, schema=MRCR_SCHEMA), data)
    failing: set[str] = set()
    faults = lambda n, body: Fault.server_error() if body["messages"][-1]["content"] in failing else None  # noqa: E731
    with ChatServer("oracle", faults) as server:
        cfg = config([data], tmp_path / "run", server, max_retries=0)
        _, summary = run_eval(cfg)
        assert server.total_requests == 4 and summary["mean_score"] == 1.0
        rows[1] = make_row(seed=99)  # the file is regenerated: row 1 changed, the rest did not
        pq.write_table(pa.Table.from_pylist(rows, schema=MRCR_SCHEMA), data)
        new_query = queries(data)[1]
        failing.add(new_query)
        server.reset()
        stats, summary = run_eval(cfg)
        assert server.total_requests == 1 and server.per_last_user == {new_query: 1}
    # The old perfect score of row 1 is gone: the new content failed, so it counts 0.
    assert stats.resumed == 3
    assert summary["n_rows"] == 4 and summary["errors"]["count"] == 1 and summary["mean_score"] == 0.75
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["data"] == [{"path": str(data.resolve()), "sha256": _sha256(data)}]


def _sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_unchanged_rows_of_a_rewritten_file_still_count(tmp_path, api_key):
    data = tmp_path / "data.parquet"
    rows = [make_row(seed=s) for s in range(3)]
    pq.write_table(pa.Table.from_pylist(rows, schema=MRCR_SCHEMA), data)
    with ChatServer("oracle") as server:
        run_eval(config([data], tmp_path / "run", server))
        before = _sha256(data)
        # Same rows, different file bytes (no compression): nothing is sent, every row still counts.
        pq.write_table(pa.Table.from_pylist(rows, schema=MRCR_SCHEMA), data, compression="none")
        assert _sha256(data) != before
        server.reset()
        stats, summary = run_eval(config([data], tmp_path / "run", server))
        assert server.total_requests == 0
    assert stats.resumed == 3 and summary["n_scored"] == 3 and summary["complete"]


@pytest.mark.parametrize(
    "change, difference",
    [
        ({"temperature": 0.5}, "request.temperature: (not set) -> 0.5"),
        ({"max_output_tokens": 64}, "request.max_completion_tokens: (not set) -> 64"),
        ({"reasoning_effort": "high"}, 'request.reasoning_effort: (not set) -> "high"'),
        ({"extra_body": {"top_k": 5}}, "request.extra_body.top_k: (not set) -> 5"),
        ({"strip_think": True}, "strip_think: false -> true"),
    ],
)
def test_changed_settings_are_refused_listing_the_differences(small_data, tmp_path, api_key, change, difference):
    with ChatServer("oracle") as server:
        cfg = config([small_data], tmp_path / "run", server, limit=2)
        run_eval(cfg)
        with pytest.raises(EvalError) as info:
            asyncio.run(run_eval_async(cfg.model_copy(update=change)))
        assert server.total_requests == 2
    assert difference in str(info.value) and "--out" in str(info.value)


def test_changed_settings_exit_2_with_one_line(small_data, tmp_path, capsys, api_key):
    out = tmp_path / "run"
    with ChatServer("oracle") as server:
        base = [str(small_data), "--model", "test-model", "--base-url", server.base_url, "--out", str(out), "--limit", "1"]
        assert call(eval_main, base, capsys)[0] == 0
        code, _, err = call(eval_main, base + ["--temperature", "0"], capsys)
        assert server.total_requests == 1
    assert code == 2 and len(err.strip().splitlines()) == 1 and "request.temperature: (not set) -> 0.0" in err


def test_a_file_named_twice_is_sent_once(small_data, tmp_path, monkeypatch, api_key):
    monkeypatch.chdir(small_data.parent)
    with ChatServer("oracle") as server:
        _, summary = run_eval(config([Path(small_data.name), small_data.resolve()], tmp_path / "run", server))
        assert server.total_requests == 12
    assert summary["n_scored"] == 12
    assert json.loads((tmp_path / "run" / "run.json").read_text())["data"] == [
        {"path": str(small_data.resolve()), "sha256": _sha256(small_data)}
    ]


# ----------------------------------------------------------------------- bad rows


def test_odd_rows_are_scored_and_a_non_json_prompt_is_a_row_error(tmp_path, capsys, api_key):
    rows = [make_row(seed=s) for s in range(4)]
    rows[1]["date_added"] = "2025-04-01T00:00:00Z"  # ISO: the grader never reads it
    rows[2]["prompt"] = "not json"
    data = tmp_path / "odd.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=MRCR_SCHEMA), data)
    out = tmp_path / "run"
    with ChatServer("oracle") as server:
        code, _, err = call(eval_main, [str(data), "--model", "m", "--base-url", server.base_url, "--out", str(out), "--quiet"], capsys)
        assert server.total_requests == 3
    assert code == 1
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_scored"] == 3 and summary["mean_score_answered"] == 1.0 and summary["mean_score"] == 0.75
    (error,) = summary["errors"]["rows"]
    assert error["row"] == 2 and error["check"] == "prompt_json" and "not valid JSON" in error["error"]


def test_only_the_needed_columns_are_read_and_needles_are_derived(tmp_path, api_key):
    rows = [make_row(seed=s, n_needles=n) for s, n in ((1, 2), (2, 4), (3, 8))]
    data = tmp_path / "lean.parquet"
    lean = [{"prompt": r["prompt"], "answer": r["answer"], "random_string_to_prepend": r["random_string_to_prepend"]} for r in rows]
    pq.write_table(pa.Table.from_pylist(lean), data)
    with ChatServer("oracle") as server:
        _, summary = run_eval(config([data], tmp_path / "run", server))
    assert summary["mean_score"] == 1.0 and [c["n_needles"] for c in summary["cells"]] == [2, 4, 8]


def test_an_unreadable_file_is_a_file_error_and_the_other_files_are_scored(small_data, tmp_path, capsys, api_key):
    broken = tmp_path / "broken.parquet"
    broken.write_text("not parquet")
    out = tmp_path / "run"
    with ChatServer("oracle") as server:
        code, _, err = call(eval_main, [str(broken), str(small_data), "--model", "m", "--base-url", server.base_url,
                                        "--out", str(out), "--quiet"], capsys)
        assert server.total_requests == 12
    assert code == 2 and len(err.strip().splitlines()) == 1 and "broken.parquet: cannot read as parquet" in err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_scored"] == 12 and not summary["complete"] and len(summary["file_errors"]) == 1


def test_read_ahead_is_bounded_by_concurrency_whatever_the_row_group(tmp_path, api_key, monkeypatch):
    rows = [make_row(seed=s) for s in range(30)]
    data = tmp_path / "one-group.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=MRCR_SCHEMA), data, row_group_size=1000)
    assert pq.ParquetFile(data).num_row_groups == 1
    made = []
    real = _chat.chat_item
    monkeypatch.setattr(_chat, "chat_item", lambda *a, **k: made.append(1) or real(*a, **k))
    ahead = []

    def watch(number, body):
        ahead.append(len(made) - number)  # rows read but not yet sent
        return None

    with ChatServer("oracle", watch, delay=0.05) as server:
        _, summary = run_eval(config([data], tmp_path / "run", server, concurrency=2))
    assert summary["n_scored"] == 30 and len(ahead) == 30
    # The 2 rows in flight, and the planner's 2 steps read ahead of them (a wave's worth).
    assert max(ahead) <= 2 + 2


# ----------------------------------------------------------------------- reasoning, think, cost


def test_reasoning_options_reach_the_server_and_usage_is_summed(small_data, tmp_path, api_key):
    with ChatServer("oracle", lambda n, body: Fault("reasoning") if n <= 3 else Fault("length") if n == 4 else None) as server:
        _, summary = run_eval(
            config([small_data], tmp_path / "run", server, concurrency=1, limit=5, reasoning_effort="low",
                   extra_body={"chat_template_kwargs": {"enable_thinking": True}}, price_in=2.0, price_out=8.0)
        )
        assert all(b["reasoning_effort"] == "low" and b["chat_template_kwargs"] == {"enable_thinking": True}
                   for b in server.requests)
    records = results(tmp_path / "run")
    assert summary["usage"]["reasoning_tokens"] == 3 * REASONING_TOKENS
    assert summary["usage"]["cached_tokens"] == 3 * CACHED_TOKENS
    assert summary["usage"]["prompt_tokens"] == sum(r["usage"]["prompt_tokens"] for r in records)
    assert summary["replies"]["with_reasoning_content"] == 3
    assert summary["replies"]["finish_reasons"] == {"stop": 4, "length": 1}
    # reasoning_content is never graded: the three reasoning rows score 1.0; the cut one less.
    assert sorted(r["score"] for r in records)[1:] == [1.0] * 4 and min(r["score"] for r in records) < 1.0
    expected = (summary["usage"]["prompt_tokens"] * 2.0 + summary["usage"]["completion_tokens"] * 8.0) / 1e6
    assert summary["cost_usd"] == pytest.approx(expected) and summary["cost_usd"] > 0


def test_think_replies_are_graded_as_they_are_and_strip_think_is_not_official(small_data, tmp_path, api_key):
    with ChatServer("oracle", lambda n, body: Fault("think")) as server:
        _, official = run_eval(config([small_data], tmp_path / "a", server, limit=3))
        _, stripped = run_eval(config([small_data], tmp_path / "b", server, limit=3, strip_think=True))
    assert official["mean_score"] == 0.0 and official["replies"]["with_think_tag"] == 3 and official["official"]
    assert stripped["mean_score"] == 1.0 and not stripped["official"] and "NOT OFFICIAL" in stripped["scoring"]


def test_known_model_price_gives_a_cost(small_data, tmp_path, api_key):
    with ChatServer("oracle") as server:
        cfg = EvalConfig(data=[str(small_data)], model="gpt-4.1", out=str(tmp_path / "run"), base_url=server.base_url, limit=2)
        _, summary = run_eval(cfg)
    usage = summary["usage"]
    assert summary["price_per_1m"] == {"input": 2.0, "cached_input": 0.5, "output": 8.0}
    assert summary["cost_usd"] == pytest.approx((usage["prompt_tokens"] * 2.0 + usage["completion_tokens"] * 8.0) / 1e6)
    with ChatServer("oracle") as server:
        _, unknown = run_eval(config([small_data], tmp_path / "other", server, limit=1))
    assert unknown["cost_usd"] is None


# ----------------------------------------------------------------------- compare


def test_compare_two_runs(small_data, tmp_path, capsys, api_key):
    with ChatServer("oracle") as server:
        run_eval(config([small_data], tmp_path / "oracle", server, price_in=1.0, price_out=1.0))
    with ChatServer("first_needle") as server:
        run_eval(config([small_data], tmp_path / "first", server))
    first_mean = summarize(tmp_path / "first")["mean_score"]
    plot = tmp_path / "compare.png"
    code, out, _ = call(eval_main, ["compare", str(tmp_path / "oracle"), str(tmp_path / "first"), "--json", "--plot", str(plot)], capsys)
    assert code == 0
    entries = json.loads(out)
    assert [e["run"] for e in entries] == [str(tmp_path / "oracle"), str(tmp_path / "first")]
    assert entries[0]["mean_score"] == 1.0 and entries[1]["mean_score"] == first_mean < 1.0
    assert entries[0]["rows"] == entries[1]["rows"] == 12 and entries[0]["errors"] == 0
    assert entries[0]["bins"] == {"<4096": 1.0} and entries[0]["cost_usd"] > 0 and entries[1]["cost_usd"] is None
    assert entries[0]["auc_128k"] is None  # the bins of the curve were not measured
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code, out, _ = call(eval_main, ["compare", str(tmp_path / "oracle"), str(tmp_path / "first")], capsys)
    assert code == 0 and "AUC@128k" in out and "1.000" in out
    code, _, err = call(eval_main, ["compare", str(tmp_path)], capsys)
    assert code == 2 and "not a mrcr-eval run directory" in err


def test_copied_run_dir_compares_like_the_original(small_data, tmp_path, api_key):
    with ChatServer("oracle") as server:
        run_eval(config([small_data], tmp_path / "run", server, limit=3))
    shutil.copytree(tmp_path / "run", tmp_path / "copy")
    assert summarize(tmp_path / "copy") == summarize(tmp_path / "run")


def test_a_file_that_breaks_half_way_keeps_the_rows_before_and_the_other_files(small_data, tmp_path, capsys, api_key):
    data = tmp_path / "half.parquet"
    pq.write_table(pa.Table.from_pylist([make_row(seed=s) for s in range(4)], schema=MRCR_SCHEMA), data, row_group_size=2)
    second = pq.ParquetFile(data).metadata.row_group(1).column(0)  # the prompts of rows 2-3
    raw = bytearray(data.read_bytes())
    start = (second.dictionary_page_offset or second.data_page_offset) + 40
    raw[start : start + 200] = bytes(b ^ 0xFF for b in raw[start : start + 200])
    data.write_bytes(raw)
    out = tmp_path / "run"
    with ChatServer("oracle") as server:
        code, _, err = call(eval_main, [str(data), str(small_data), "--model", "m", "--base-url", server.base_url,
                                        "--out", str(out), "--quiet"], capsys)
        assert server.total_requests == 2 + 12
    assert code == 2 and "half.parquet: cannot read past row 1" in err and len(err.strip().splitlines()) == 1
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_scored"] == 14 and summary["mean_score"] == 1.0 and not summary["complete"]


def test_a_run_dir_of_an_older_version_is_refused(small_data, tmp_path, api_key):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "run.json").write_text(json.dumps({"model": "test-model", "data": [str(small_data)]}))
    with ChatServer("oracle") as server:
        with pytest.raises(EvalError, match="older mrcr-eval"):
            asyncio.run(run_eval_async(config([small_data], tmp_path / "run", server)))
        assert server.total_requests == 0


# ----------------------------------------------------------------------- another recipe plugs in


def test_a_recipe_with_transcript_groups_is_sent_group_by_group(tmp_path, api_key):
    """The runner knows items only: a recipe it is given (any object with the EvalRecipe methods)
    recognises the file by its columns, supplies and grades its items, and the items of one
    transcript group are sent one after another."""
    from mrcr_gen.eval import EvalItem
    from mrcr_gen.eval._items import EvalDefaults
    from mrcr_gen.eval import run_eval as run_eval_with

    data = tmp_path / "groups.parquet"
    pq.write_table(pa.table({"toy_queries": ["a", "b", "c", "d", "e", "f"], "toy_group": ["g1", "g1", "g1", "g2", "g2", "g3"]}), data)

    class Toy(EvalDefaults):
        name = "toy"
        signatures = (FileSignature(frozenset({"toy_queries"})),)

        def read_items(self, path, *, tokenizer_spec, skip=None):
            return read(path)

        def grade(self, response, item):
            return float(response == item.answer)

        def bin_label(self, upper):
            return "(4096, 8192]"

        def bin_uppers(self):
            return (8192,)

    def read(path):
        table = pq.read_table(path)
        for row, (query, group) in enumerate(zip(table["toy_queries"].to_pylist(), table["toy_group"].to_pylist())):
            messages = [{"role": "user", "content": f"Prepend PFX to the 1st (1 indexed) poem about {query}. "
                                                    "Do not include any other text in your response."}]
            yield EvalItem(source=str(path), row=row, digest=query, messages=messages, answer="PFX" + query,
                           prefix="PFX", n_needles=1, bin_upper=8192, group=group, recipe="toy")

    started: dict[str, float] = {}
    finished: dict[str, float] = {}

    def query_of(messages) -> str:
        return messages[-1]["content"].split(" about ")[1][0]

    def watch(number, body):
        started[query_of(body["messages"])] = time.monotonic()
        return Fault.slow(0.1)

    def policy(messages, body):
        finished[query_of(messages)] = time.monotonic()
        return "PFX" + query_of(messages)

    with ChatServer(policy, watch) as server:
        _, summary = run_eval_with(config([data], tmp_path / "run", server, concurrency=3), recipes=(Toy(),))
        order = [b["messages"][-1]["content"].split(" about ")[1][0] for b in server.requests]
    assert summary["mean_score"] == 1.0 and summary["n_scored"] == 6
    assert [q for q in order if q in "abc"] == ["a", "b", "c"] and [q for q in order if q in "de"] == ["d", "e"]
    for earlier, later in ("ab", "bc", "de"):  # within a group: the next is sent once the last is answered
        assert started[later] >= finished[earlier]
    assert server.max_in_flight >= 2  # groups run side by side
