"""Issue 22 items 1, 2 and 6: `mrcr-eval --batch` through the test server's Batch API, and batch
files (`mrcr-eval batch export`, `vllm run-batch`-style results, `mrcr-eval batch import`)."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mrcr_gen import run_eval, summarize_run, write_report
from mrcr_gen.cli import eval_main
from mrcr_gen.batch import BatchFolder, BatchLimits, outcome_of
from mrcr_gen.eval import EvalConfig
from mrcr_gen.eval import run_batch_async
from mrcr_gen.recipes import RECIPES
from tests.support.chat_server import EXPIRED_ERROR, BatchBehaviour, ChatServer, Fault, oracle
from tests.support.processes import command_env, stop_while_running

from .conftest import API_KEY
from .test_eval_cli import call
from .test_eval_runner import results

FAST = BatchLimits(poll_first_s=0.01, poll_cap_s=0.05)
PRICES = {"price_in": 1.0, "price_out": 4.0}
#: Summary fields that say how the replies were obtained, not what they scored.
HOW = ("settings", "price_per_1m", "cost_usd", "cost_without_cache_usd", "cache_saved_usd", "latency_s", "base_url")
#: Record fields that say how the reply was obtained.
HOW_RECORD = ("settings", "latency_s", "batch_id")


def batch_run(data: Path, out: Path, server: ChatServer, limits: BatchLimits = FAST, **options) -> dict:
    config = EvalConfig(data=[str(data)], model="test-model", out=str(out), base_url=server.base_url, **PRICES)
    stats = asyncio.run(run_batch_async(config, recipes=RECIPES, api_key=API_KEY, limits=limits, **options))
    return {"stats": stats, "summary": write_report(out)}


def uploaded_requests(server: ChatServer) -> list[list[dict]]:
    """The request lines of every batch input file the server received."""
    files = [f for f in server.files.values() if f["object"]["purpose"] == "batch"]
    return [[json.loads(line) for line in f["content"].decode().splitlines()] for f in files]


def without(record: dict, keys: tuple[str, ...]) -> dict:
    return {k: v for k, v in record.items() if k not in keys}


def test_batch_run_grades_as_an_online_run_at_half_the_price(small_data, tmp_path, capsys, api_key):
    """The happy path: split by the request limit, every row graded once; the records and the summary
    equal an online run's on the same rows and replies, but for how they were obtained and the price."""
    with ChatServer("oracle") as server:
        _, online = run_eval(
            EvalConfig(data=[str(small_data)], model="test-model", out=str(tmp_path / "online"), base_url=server.base_url, **PRICES)
        )
        online_bodies = sorted(server.requests, key=json.dumps)
    faults = {"upload": {1: Fault.rate_limit()}, "retrieve": {1: Fault.server_error()}}
    with ChatServer("oracle", batches=BatchBehaviour(polls=2, api_faults=faults)) as server:
        limits = BatchLimits(max_requests=5, poll_first_s=0.01)
        done = batch_run(small_data, tmp_path / "batch", server, limits, keep_files=True)  # files read below
        assert server.total_requests == 0  # nothing online
        parts = uploaded_requests(server)
        assert [len(p) for p in parts] == [5, 5, 2] and server.stats()["batches_created"] == 3
        assert server.faults_served == {"429": 1, "500": 1}  # retried
        # Each request is the body the online run sends, keyed by the row digest.
        assert sorted((line["body"] for p in parts for line in p), key=json.dumps) == online_bodies
        digests = {r["digest"] for r in results(tmp_path / "batch")}
        assert sorted(line["custom_id"] for p in parts for line in p) == sorted(digests)
    summary = done["summary"]
    assert summary["complete"] and summary["mean_score"] == 1.0 and summary["n_rows"] == 12
    assert without(summary, HOW) == without(online, HOW)
    for cost in ("cost_usd", "cost_without_cache_usd", "cache_saved_usd"):
        assert summary[cost] == pytest.approx(online[cost] / 2), cost
    assert summary["price_per_1m"] == {
        "input": 0.5, "cached_input": 0.5, "output": 2.0, "batch_discount": 0.5,
        "list": {"input": 1.0, "cached_input": 1.0, "output": 4.0},
    }
    assert without(summary["settings"], ("base_url",)) == without(online["settings"], ("base_url",)) | {"batch": "api"}
    by_row = {(r["file"], r["row"]): r for r in results(tmp_path / "online")}
    batch_records = results(tmp_path / "batch")
    assert len(batch_records) == 12 and all(r["latency_s"] is None and r["batch_id"] for r in batch_records)
    for record in batch_records:
        assert without(record, HOW_RECORD) == without(by_row[(record["file"], record["row"])], HOW_RECORD)
    # report, view and compare read it as any run folder
    run_dir = str(tmp_path / "batch")
    assert summarize_run(run_dir) == summary
    code, out, _ = call(eval_main, ["compare", str(tmp_path / "online"), run_dir, "--json"], capsys)
    entries = json.loads(out)
    assert code == 0 and [e["mean_score"] for e in entries] == [1.0, 1.0]
    assert entries[1]["cost_usd"] == pytest.approx(entries[0]["cost_usd"] / 2)
    code, out, _ = call(eval_main, ["view", run_dir], capsys)
    assert code == 0 and (tmp_path / "batch" / "report.html").read_text().startswith("<!DOCTYPE html>")
    # An online run on a batch run folder is a change of settings: refused before anything is sent.
    args = [str(small_data), "--model", "test-model", "--base-url", "http://127.0.0.1:9/v1", "--out", run_dir]
    code, _, err = call(eval_main, [*args, "--price-in", "1", "--price-out", "4"], capsys)
    assert code == 2 and 'batch: "api" -> (not set)' in err


def test_batch_files_stay_within_the_byte_limit(small_data, tmp_path, api_key):
    with ChatServer("oracle") as server:
        limits = BatchLimits(max_bytes=8_000, poll_first_s=0.01)
        done = batch_run(small_data, tmp_path / "run", server, limits, keep_files=True)
        sizes = [f["object"]["bytes"] for f in server.files.values() if f["object"]["purpose"] == "batch"]
    assert len(sizes) > 3 and all(size <= 8_000 for size in sizes)
    assert sum(len(p) for p in uploaded_requests(server)) == 12 and done["summary"]["complete"]


def test_a_request_over_the_byte_limit_is_a_row_error(small_data, tmp_path, api_key):
    with ChatServer("oracle") as server:
        done = batch_run(small_data, tmp_path / "run", server, BatchLimits(max_bytes=100, poll_first_s=0.01))
        assert server.stats()["batches_created"] == 0
    assert done["summary"]["errors"]["by_check"] == {"batch_too_large": 12}
    assert not done["summary"]["complete"]


def test_a_batch_that_expires_with_some_requests_done(small_data, tmp_path, api_key):
    """Expired requests are row errors (0 in the mean, incomplete); a rerun sends those alone again."""
    out = tmp_path / "run"
    with ChatServer("oracle", batches=BatchBehaviour(expire_after=5)) as server:
        done = batch_run(small_data, out, server, keep_files=True)
        summary = done["summary"]
        assert summary["n_scored"] == 5 and summary["errors"]["by_check"] == {"batch_expired": 7}
        assert not summary["complete"] and summary["mean_score"] == pytest.approx(5 / 12)
        expired = {r["digest"] for r in results(out) if r["status"] == "error"}
        server.batch_behaviour = BatchBehaviour()
        again = batch_run(small_data, out, server, keep_files=True)
        second = uploaded_requests(server)[1]
    assert {line["custom_id"] for line in second} == expired  # never a row that has a result
    assert again["stats"].requests_submitted == 7 and again["stats"].resumed == 5
    assert again["summary"]["complete"] and again["summary"]["mean_score"] == 1.0


def test_a_failed_batch_makes_its_rows_errors(small_data, tmp_path, api_key):
    with ChatServer("oracle", batches=BatchBehaviour(fail="token_limit_exceeded")) as server:
        done = batch_run(small_data, tmp_path / "run", server)
    errors = done["summary"]["errors"]
    assert errors["by_check"] == {"batch_failed": 12}
    assert "token_limit_exceeded" in errors["rows"][0]["error"]


def test_no_wait_submits_and_a_rerun_collects(small_data, tmp_path, capsys, api_key):
    out = tmp_path / "run"
    with ChatServer("oracle", batches=BatchBehaviour(hold=True)) as server:
        args = [str(small_data), "--model", "test-model", "--base-url", server.base_url, "--out", str(out), "--batch"]
        code, _, err = call(eval_main, [*args, "--no-wait", "--poll-interval", "0.01"], capsys)
        assert code == 1 and "12 requests are in 1 batches still running" in err
        assert not json.loads((out / "run.json").read_text())["finished"]
        server.release_batches()
        code, _, err = call(eval_main, [*args, "--poll-interval", "0.01"], capsys)
        assert code == 0, err
        assert server.stats()["batches_created"] == 1 and server.stats()["batch_requests"] == 12
    assert json.loads((out / "summary.json").read_text())["complete"]


def test_kill_while_polling_then_a_rerun_submits_nothing_again(small_data, tmp_path, capsys):
    """A real `mrcr-eval --batch` process SIGKILLed while it polls; the rerun polls the batch it made."""
    out = tmp_path / "run"
    with ChatServer("oracle", batches=BatchBehaviour(hold=True)) as server:
        args = [str(small_data), "--model", "test-model", "--base-url", server.base_url, "--out", str(out), "--batch"]
        command = [*args, "--poll-interval", "0.05"]
        import sys

        stopped = stop_while_running(
            [sys.executable, "-c", "from mrcr_gen.cli import eval_main; eval_main()", *command],
            out,
            signal.SIGKILL,
            lambda _: server.api_calls["retrieve"] >= 2,
            env=command_env(OPENAI_API_KEY=API_KEY),
        )
        assert stopped.returncode == -signal.SIGKILL
        assert results(out) == [] and server.stats()["batches_created"] == 1
        server.release_batches()
        code, _, err = call(eval_main, [*command, "--quiet"], capsys)
        assert code == 0, err
        stats = server.stats()
    assert stats["batches_created"] == 1 and stats["api_calls"]["upload"] == 1 and stats["batch_requests"] == 12
    assert json.loads((out / "summary.json").read_text())["mean_score"] == 1.0


def test_the_batch_state_survives_a_run_killed_between_upload_and_batch(small_data, tmp_path, api_key):
    """A file uploaded by a run that never recorded its batch: the batch made of it is adopted, not made again."""
    out = tmp_path / "run"
    with ChatServer("oracle") as server:
        batch_run(small_data, out, server, keep_files=True)  # a killed run deleted nothing
        state_path = out / "batches" / "batches.json"
        state = json.loads(state_path.read_text())
        # As if killed right after batches.create: the id never reached the record.
        state["parts"][0].update(batch_id=None, status=None, done=False, graded=False, output=None)
        state_path.write_text(json.dumps(state))
        (out / "results.jsonl").write_text("")
        done = batch_run(small_data, out, server)
        assert server.stats()["batches_created"] == 1 and server.stats()["api_calls"]["list"] == 1
    assert done["summary"]["complete"] and done["stats"].requests_submitted == 0


# ----------------------------------------------------------------------- batch files


def vllm_line(request: dict, n: int) -> dict:
    """A `vllm run-batch` output line answering `request` as the oracle (with vLLM's extra fields)."""
    body = request["body"]
    text = oracle(body["messages"], body)
    return {
        "id": f"vllm-{n:032x}",
        "custom_id": request["custom_id"],
        "response": {
            "status_code": 200,
            "request_id": f"vllm-batch-{n:032x}",
            "body": {
                "id": f"chatcmpl-{n}",
                "object": "chat.completion",
                "created": 1700000000,
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text, "reasoning_content": None, "tool_calls": []},
                        "logprobs": None,
                        "finish_reason": "stop",
                        "stop_reason": None,
                    }
                ],
                "usage": {"prompt_tokens": 100, "total_tokens": 110, "completion_tokens": 10, "prompt_tokens_details": None},
                "prompt_logprobs": None,
                "kv_transfer_params": None,
            },
        },
        "error": None,
    }


def test_export_then_import_of_vllm_results(small_data, tmp_path, capsys, api_key):
    requests = tmp_path / "requests.jsonl"
    code, _, err = call(
        eval_main,
        ["batch", "export", str(small_data), "-o", str(requests), "--model", "Qwen/Q", "--temperature", "0",
         "--extra-body", '{"top_k": 1}'],
        capsys,
    )
    assert code == 0 and "wrote 12 requests" in err
    lines = [json.loads(line) for line in requests.read_text().splitlines()]
    assert {line["url"] for line in lines} == {"/v1/chat/completions"} and len({line["custom_id"] for line in lines}) == 12
    assert all(line["body"]["temperature"] == 0 and line["body"]["top_k"] == 1 for line in lines)
    answered = [vllm_line(line, n) for n, line in enumerate(lines[:10])]
    # vLLM's answer to a prompt over the model's length: an ErrorResponse, no body.
    answered.append(
        {
            "id": "vllm-x",
            "custom_id": lines[10]["custom_id"],
            "response": {"status_code": 400, "request_id": "vllm-batch-x", "body": None},
            "error": {"error": {"message": "This model's maximum context length is 4096 tokens. However, you "
                                "requested 5000 tokens.", "type": "BadRequestError", "param": None, "code": 400}},
        }
    )
    results_file = tmp_path / "results.jsonl"
    results_file.write_text("".join(json.dumps(line) + "\n" for line in answered))  # row 11: no line
    out = tmp_path / "run"
    options = ["--model", "Qwen/Q", "--temperature", "0", "--extra-body", '{"top_k": 1}', "--out", str(out)]
    code, _, err = call(eval_main, ["batch", "import", str(results_file), str(small_data), *options], capsys)
    assert code == 1, err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_scored"] == 10 and summary["errors"]["by_check"] == {"prompt_too_long": 1, "not_in_results": 1}
    assert summary["settings"]["base_url"] == "offline" and summary["settings"]["batch"] == "file"
    assert summary["usage"]["prompt_tokens"] == 1000
    # The rest, answered later: imported into the same run folder, the rows done before kept.
    rest = tmp_path / "rest.jsonl"
    rest.write_text("".join(json.dumps(vllm_line(line, n)) + "\n" for n, line in enumerate(lines[10:], 10)))
    code, _, err = call(eval_main, ["batch", "import", str(rest), str(small_data), *options], capsys)
    assert code == 0, err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] and summary["mean_score"] == 1.0 and summary["n_rows"] == 12
    # Another model's results are refused before anything is written.
    code, _, err = call(eval_main, ["batch", "import", str(rest), str(small_data), *options[:-2], "--out", str(tmp_path / "x"),
                                    "--model", "other"], capsys)
    assert code == 2 and "not of --model other" in err


def test_import_equals_an_online_run(small_data, tmp_path, capsys, api_key):
    """The same replies graded from a results file give the online run's summary."""
    with ChatServer("oracle") as server:
        _, online = run_eval(
            EvalConfig(data=[str(small_data)], model="test-model", out=str(tmp_path / "online"), base_url=server.base_url)
        )
    requests = tmp_path / "requests.jsonl"
    assert call(eval_main, ["batch", "export", str(small_data), "-o", str(requests), "--model", "test-model"], capsys)[0] == 0
    with ChatServer("oracle") as server:  # the server's own answers, as batch output lines
        lines = [json.loads(line) for line in requests.read_text().splitlines()]
        import urllib.request

        answered = []
        for n, line in enumerate(lines):
            request = urllib.request.Request(
                f"{server.base_url}/chat/completions", json.dumps(line["body"]).encode(), {"Content-Type": "application/json"}
            )
            body = json.loads(urllib.request.urlopen(request).read())
            answered.append({"id": f"b{n}", "custom_id": line["custom_id"], "response": {"status_code": 200, "request_id": "r", "body": body}, "error": None})
    results_file = tmp_path / "results.jsonl"
    results_file.write_text("".join(json.dumps(line) + "\n" for line in answered))
    out = tmp_path / "imported"
    code, _, err = call(eval_main, ["batch", "import", str(results_file), str(small_data), "--model", "test-model", "--out", str(out), "-q"], capsys)
    assert code == 0, err
    imported = json.loads((out / "summary.json").read_text())
    assert without(imported, HOW) == without(online, HOW)


def test_output_lines_of_both_services_are_read():
    expired = {"id": "batch_req_1", "custom_id": "a", "response": None, "error": EXPIRED_ERROR}
    assert outcome_of(expired)[1].code == "batch_expired" and not outcome_of(expired)[1].ok
    crashed = {"id": "vllm-1", "custom_id": "b", "response": {"status_code": 400, "request_id": "r"}, "error": "boom"}
    assert outcome_of(crashed)[1].error == "boom" and outcome_of(crashed)[1].status == 400
    refused = {"custom_id": "c", "response": {"status_code": 500, "body": {"error": {"message": "server"}}}, "error": None}
    assert outcome_of(refused)[1].error == "server"
    assert outcome_of({"no": "id"}) is None


# ----------------------------------------------------------------------- the split


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sizes=st.lists(st.integers(min_value=1, max_value=120), max_size=60),
    max_requests=st.integers(min_value=1, max_value=7),
    max_bytes=st.integers(min_value=1, max_value=300),
)
def test_the_split_keeps_every_request_once_in_order_within_the_limits(tmp_path_factory, sizes, max_requests, max_bytes):
    """Every request that fits a batch file is in exactly one part, in order; no part exceeds a limit;
    a part is closed only when the next request would not fit it (no more batches than needed)."""
    folder = tmp_path_factory.mktemp("parts")
    batches = BatchFolder(folder, BatchLimits(max_requests=max_requests, max_bytes=max_bytes))
    writer = batches.writer()
    lines = {f"id{i}": b"x" * (size - 1) + b"\n" for i, size in enumerate(sizes)}
    taken = [custom_id for custom_id, data in lines.items() if writer.add(custom_id, data)]
    assert taken == [custom_id for custom_id, data in lines.items() if len(data) <= max_bytes]
    parts = writer.close()
    ids = [batches.part_ids(part) for part in parts]
    assert [i for part in ids for i in part] == taken
    for part, part_ids in zip(parts, ids, strict=True):
        content = batches.requests_path(part).read_bytes()
        assert content == b"".join(lines[i] for i in part_ids) and part.bytes == len(content)
        assert 1 <= part.requests == len(part_ids) <= max_requests and part.bytes <= max_bytes
    for part, following in zip(ids, ids[1:], strict=False):
        closed_early = len(part) < max_requests and sum(len(lines[i]) for i in part) + len(lines[following[0]]) <= max_bytes
        assert not closed_early


def test_a_control_run_exports_and_sends_only_what_the_control_keeps(small_data, tmp_path, api_key):
    """`--batch`/`batch export` with `--control query-only`: each request holds the row's
    query-only messages (as an online control sends), never the whole conversation."""
    from mrcr_gen._api import export_batch
    from mrcr_gen.eval import read_items
    from mrcr_gen.recipes import recipe_named

    config = EvalConfig(data=[str(small_data)], model="test-model", out=str(tmp_path / "unused"), control="query-only")
    export_batch(config, tmp_path / "requests.jsonl")
    lines = [json.loads(line) for line in (tmp_path / "requests.jsonl").read_text().splitlines()]
    items = {item.digest: item for item in read_items(str(small_data), recipes=RECIPES)}
    assert lines and {line["custom_id"] for line in lines} <= set(items)
    for line in lines:
        item = items[line["custom_id"]]
        expected = recipe_named(item.recipe).query_only_messages(item)
        assert line["body"]["messages"] == expected and len(expected) < len(item.messages)
