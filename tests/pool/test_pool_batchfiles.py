"""`pool export-requests` and `pool import-results`: the OpenAI batch input format out, `vllm
run-batch` output lines in (the shape vLLM writes: id, custom_id, response {status_code,
request_id, body}, error), every problem line reported or refused."""

from __future__ import annotations

import json

import pytest

from mrcr_gen.cli import gen_main
from mrcr_gen.pool import PoolError, read_pool
from mrcr_gen.pool._batchfiles import export_requests, manifest_path, read_manifest, store_replies
from mrcr_gen.pool._cache import WritingCache, cache_key
from mrcr_gen.pool._quality import quality_report_path
from mrcr_gen.recipes.openai_mrcr import plan_asks

MODEL = "Qwen/Qwen2.5-7B-Instruct"
PLAN_ARGS = ["--entities", "2", "--formats", "poem,riddle", "--needle-asks", "1", "--needle-variants", "3"]


def run(args, capsys):
    with pytest.raises(SystemExit) as exit_info:
        gen_main([str(a) for a in args])
    captured = capsys.readouterr()
    return exit_info.value.code or 0, captured.out, captured.err


def export(tmp_path, capsys, *extra):
    args = ["pool", "export-requests", "--model", MODEL, "--out", tmp_path / "requests.jsonl"]
    args += ["--cache-dir", tmp_path / "cache", "--temperature", "1.0", *PLAN_ARGS, *extra]
    return run(args, capsys)


def vllm_line(request: dict, n: int, *, text: str | None = None, model: str = MODEL) -> dict:
    """What `vllm run-batch` writes for one request line."""
    ask = request["body"]["messages"][0]["content"]
    body = {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": 1733300000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text or f"Writing {n}: an answer to {ask}."},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 14, "total_tokens": 44, "completion_tokens": 30},
    }
    response = {"status_code": 200, "request_id": f"vllm-batch-{n}", "body": body}
    return {"id": f"vllm-{n}", "custom_id": request["custom_id"], "response": response, "error": None}


def failed_line(request: dict) -> dict:
    error = {"object": "error", "message": "This model's maximum context length is 32 tokens", "code": 400}
    response = {"status_code": 400, "request_id": "vllm-batch-x", "body": error}
    return {"id": "vllm-x", "custom_id": request["custom_id"], "response": response, "error": None}


def write_lines(path, lines):
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def requests_of(tmp_path) -> list[dict]:
    return [json.loads(line) for line in (tmp_path / "requests.jsonl").read_text().splitlines()]


def cached(tmp_path) -> int:
    cache = WritingCache(tmp_path / "cache")
    try:
        return len(cache)
    finally:
        cache.close()


def import_free(tmp_path, results, capsys):
    """`pool import-results RESULTS` of requests.jsonl into p.parquet, priced at 0."""
    args = ["pool", "import-results", results, "--requests", tmp_path / "requests.jsonl"]
    args += ["--out", tmp_path / "p.parquet", "--cache-dir", tmp_path / "cache"]
    return run([*args, "--price-in", "0", "--price-out", "0"], capsys)


def test_export_writes_the_batch_input_format(tmp_path, capsys):
    code, out, err = export(tmp_path, capsys)
    assert code == 0, err
    requests = requests_of(tmp_path)
    plan = plan_asks(formats=["poem", "riddle"], entities=2, needle_asks=1, needle_variants=3)
    assert len(requests) == sum(plan.values()) == 6 and "6 requests" in out
    manifest = read_manifest(tmp_path / "requests.jsonl")
    for line in requests:
        assert set(line) == {"custom_id", "method", "url", "body"}
        assert (line["method"], line["url"]) == ("POST", "/v1/chat/completions")
        assert line["body"]["model"] == MODEL and line["body"]["temperature"] == 1.0
        (message,) = line["body"]["messages"]
        ask, variant = manifest.requests[line["custom_id"]]
        assert message == {"role": "user", "content": ask}
        assert line["custom_id"] == cache_key("run-batch", MODEL, {"temperature": 1.0}, ask, variant)
    assert len({line["custom_id"] for line in requests}) == 6
    first = (tmp_path / "requests.jsonl").read_bytes()
    assert export(tmp_path, capsys)[0] == 0
    assert (tmp_path / "requests.jsonl").read_bytes() == first  # stable ids, same bytes


def test_round_trip_and_rerun(tmp_path, capsys):
    export(tmp_path, capsys)
    requests = requests_of(tmp_path)
    results = write_lines(tmp_path / "results.jsonl", [vllm_line(r, n) for n, r in enumerate(requests)])
    args = [
        "pool",
        "import-results",
        results,
        "--requests",
        tmp_path / "requests.jsonl",
        "--out",
        tmp_path / "p.parquet",
    ]
    args += ["--cache-dir", tmp_path / "cache", "--price-in", "0", "--price-out", "0"]
    code, _, err = run(args, capsys)
    assert code == 0, err
    pool = read_pool(tmp_path / "p.parquet")
    assert len(pool) == 6 and {w.source for w in pool} == {f"{MODEL} @ run-batch"}
    assert quality_report_path(tmp_path / "p.parquet").is_file() and cached(tmp_path) == 6
    report = json.loads((tmp_path / "p.build.json").read_text())
    assert (report["stored"], report["completion_tokens"]) == (6, 180)
    # importing the same file again stores nothing and reports what the first import did: the
    # file's replies, each once (an import killed after the cache's commit leaves none uncosted)
    code, _, err = run(args, capsys)
    report = json.loads((tmp_path / "p.build.json").read_text())
    assert code == 0 and (report["stored"], report["already_cached"], report["earlier"]) == (0, 6, 6)
    assert report["completion_tokens"] == 180 and "(0 stored now, 6 by an earlier import)" in err
    # exporting again asks for nothing: every writing is in the cache
    code, out, _ = export(tmp_path, capsys)
    assert code == 0 and requests_of(tmp_path) == [] and "0 requests" in out


def test_missing_failed_duplicated_and_conflicting_lines_are_reported(tmp_path, capsys):
    export(tmp_path, capsys)
    r = requests_of(tmp_path)
    lines = [vllm_line(r[1], 1), vllm_line(r[1], 1), vllm_line(r[2], 2), vllm_line(r[2], 2, text="Another text.")]
    lines += [failed_line(r[3]), vllm_line(r[4], 4), vllm_line(r[5], 5)]  # r[0]: missing
    results = write_lines(tmp_path / "results.jsonl", lines)
    code, _, err = import_free(tmp_path, results, capsys)
    assert code == 1
    report = json.loads((tmp_path / "p.build.json").read_text())
    manifest = read_manifest(tmp_path / "requests.jsonl")

    def label(i):
        ask, variant = manifest.requests[r[i]["custom_id"]]
        return f"'{ask}' variant {variant}"

    assert report["stored"] == 3 and report["duplicated"] == 1
    assert report["conflicting"] == [label(2)] and report["missing"] == [label(0)]
    assert [(f["ask"], f["variant"]) for f in report["failed"]] == [tuple(manifest.requests[r[3]["custom_id"]])]
    assert "maximum context length" in report["failed"][0]["error"]
    assert len(read_pool(tmp_path / "p.parquet")) == 3 and cached(tmp_path) == 3
    assert "3 writings are not in the pool" in err.splitlines()[-1]
    # the next export asks exactly for what is not in the cache
    export(tmp_path, capsys)
    assert {line["custom_id"] for line in requests_of(tmp_path)} == {r[i]["custom_id"] for i in (0, 2, 3)}


def test_a_gap_of_a_file_is_no_gap_when_the_cache_has_the_writing(tmp_path, capsys):
    """A second output of the same requests that fails or leaves out writings an earlier import
    stored: the pool has every writing, nothing is reported missing, exit 0."""
    export(tmp_path, capsys)
    r = requests_of(tmp_path)
    assert (
        import_free(tmp_path, write_lines(tmp_path / "all.jsonl", [vllm_line(q, n) for n, q in enumerate(r)]), capsys)[
            0
        ]
        == 0
    )
    partial = [failed_line(r[0]), vllm_line(r[1], 1), vllm_line(r[1], 1, text="Another text.")]  # the rest: missing
    code, _, err = import_free(tmp_path, write_lines(tmp_path / "partial.jsonl", partial), capsys)
    report = json.loads((tmp_path / "p.build.json").read_text())
    assert code == 0, err
    assert (report["failed"], report["missing"], report["conflicting"]) == ([], [], [])
    assert len(read_pool(tmp_path / "p.parquet")) == 6 and cached(tmp_path) == 6


@pytest.mark.parametrize("problem", ["foreign", "model", "garbage only", "the requests", "not a completion"])
def test_bad_output_files_are_refused_with_nothing_written(tmp_path, capsys, problem):
    export(tmp_path, capsys)
    r = requests_of(tmp_path)
    lines = [vllm_line(request, n) for n, request in enumerate(r)]
    if problem == "foreign":
        lines[3]["custom_id"] = "f" * 64
    elif problem == "model":
        lines[3] = vllm_line(r[3], 3, model="meta-llama/Llama-3.1-8B-Instruct")
    elif problem == "not a completion":
        lines[3]["response"]["body"] = {"object": "chat.completion", "model": MODEL, "choices": []}
    results = write_lines(tmp_path / "results.jsonl", lines)
    if problem == "garbage only":
        results.write_text('{"custom_id": "torn", "resp\nnot json\n')
    elif problem == "the requests":
        results = tmp_path / "requests.jsonl"
    code, _, err = import_free(tmp_path, results, capsys)
    assert code == 2 and err.count("\n") == 1 and err.startswith("mrcr-gen: error: "), err
    assert cached(tmp_path) == 0 and not (tmp_path / "p.parquet").exists()


def test_a_torn_line_is_reported_and_the_other_replies_stored(tmp_path, capsys):
    """The core reader's rule: a torn line (a cut-off download) does not stop the paid replies from
    being stored; its request has no reply (missing, exit 1) and the next export asks for it."""
    export(tmp_path, capsys)
    r = requests_of(tmp_path)
    text = "".join(json.dumps(vllm_line(request, n)) + "\n" for n, request in enumerate(r))
    cut = text.splitlines(keepends=True)
    results = tmp_path / "results.jsonl"
    results.write_text("".join(cut[:2]) + cut[2][:40] + "\n" + "".join(cut[3:]))
    code, _, err = import_free(tmp_path, results, capsys)
    assert code == 1 and f"{results}:3: not a batch output line (torn or corrupted); ignored" in err
    report = json.loads((tmp_path / "p.build.json").read_text())
    manifest = read_manifest(tmp_path / "requests.jsonl")
    ask, variant = manifest.requests[r[2]["custom_id"]]
    assert report["torn"] == [f"{results}:3"] and report["missing"] == [f"'{ask}' variant {variant}"]
    assert report["stored"] == 5 and cached(tmp_path) == 5
    export(tmp_path, capsys)
    assert [line["custom_id"] for line in requests_of(tmp_path)] == [r[2]["custom_id"]]


def test_imported_openai_lines_are_priced_at_the_batch_discount(tmp_path, capsys):
    """gpt-4o's replies from the Batch API (dated model name, cached prompt tokens): the ledger's
    cost at half the list price; price flags are taken as the price of the lines."""
    from mrcr_gen._prices import CACHED_INPUT_PRICES, PRICES

    args = ["pool", "export-requests", "--model", "gpt-4o", "--endpoint", "batch-api", "--out", tmp_path / "r.jsonl"]
    assert run([*args, "--cache-dir", tmp_path / "cache", *PLAN_ARGS], capsys)[0] == 0
    lines = []
    for n, line in enumerate(json.loads(t) for t in (tmp_path / "r.jsonl").read_text().splitlines()):
        out = vllm_line(line, n, model="gpt-4o-2024-08-06")
        out["response"]["body"]["usage"]["prompt_tokens_details"] = {"cached_tokens": 4}
        lines.append(out)
    results = write_lines(tmp_path / "results.jsonl", lines)
    args = ["pool", "import-results", results, "--requests", tmp_path / "r.jsonl", "--out", tmp_path / "p.parquet"]
    code, _, err = run([*args, "--cache-dir", tmp_path / "cache"], capsys)
    assert code == 0, err
    report = json.loads((tmp_path / "p.build.json").read_text())
    listed, cached_price = PRICES["gpt-4o"], CACHED_INPUT_PRICES["gpt-4o"]
    full = (6 * 10 * listed[0] + 6 * 4 * cached_price + 6 * 30 * listed[1]) / 1e6
    assert report["cached_tokens"] == 24 and report["price_per_1m"]["batch_discount"] == 0.5
    assert report["cost_usd"] == pytest.approx(full / 2) and "Batch API's discount" in err
    flags = ["--price-in", "1", "--price-out", "1", "--out", tmp_path / "q.parquet"]
    (tmp_path / "cache2").mkdir()
    code, _, err = run([*args[:-2], *flags, "--cache-dir", tmp_path / "cache2"], capsys)
    report = json.loads((tmp_path / "q.build.json").read_text())
    assert (
        code == 0
        and report["cost_usd"] == pytest.approx(6 * (40 + 4 * cached_price) / 1e6)
        and "batch_discount" not in report["price_per_1m"]
    )


def test_changed_requests_and_foreign_out_files_are_refused(tmp_path, capsys):
    (tmp_path / "requests.jsonl").write_text("mine\n")
    code, _, err = export(tmp_path, capsys)
    assert code == 2 and "not a requests file this command wrote" in err
    assert (tmp_path / "requests.jsonl").read_text() == "mine\n" and not manifest_path(
        tmp_path / "requests.jsonl"
    ).exists()
    (tmp_path / "requests.jsonl").unlink()
    export(tmp_path, capsys)
    with (tmp_path / "requests.jsonl").open("a") as handle:
        handle.write("\n")
    with pytest.raises(PoolError, match="changed since it was exported"):
        read_manifest(tmp_path / "requests.jsonl")


def test_store_replies_takes_each_reply_once_and_dated_model_names(tmp_path):
    plan = plan_asks(formats=["poem"], entities=1, needle_asks=0)
    manifest = export_requests(
        plan, model="gpt-4o", out=tmp_path / "r.jsonl", cache_dir=tmp_path / "cache", endpoint="batch-api"
    )
    (custom_id,) = manifest.requests
    body = vllm_line({"custom_id": custom_id, "body": {"messages": [{"content": "x"}]}}, 0, model="gpt-4o-2024-08-06")
    reply = (custom_id, body["response"]["body"])
    with pytest.raises(PoolError, match="given twice"):
        store_replies(manifest, [reply, reply], tmp_path / "cache")
    assert cached(tmp_path) == 0
    stored = store_replies(manifest, [reply], tmp_path / "cache")
    assert (stored.stored, stored.prompt_tokens, stored.completion_tokens) == (1, 14, 30)
    again = store_replies(manifest, [reply], tmp_path / "cache")  # as after an import killed before its report
    assert (again.stored, again.already_cached, again.earlier, again.completion_tokens) == (0, 1, 1, 30)
    other = vllm_line({"custom_id": custom_id, "body": {"messages": [{"content": "x"}]}}, 1, model="gpt-4o")
    elsewhere = store_replies(manifest, [(custom_id, other["response"]["body"])], tmp_path / "cache")
    assert (elsewhere.already_cached, elsewhere.earlier, elsewhere.completion_tokens) == (1, 0, 0)  # not this reply


def test_put_all_stores_all_or_nothing(tmp_path):
    from types import SimpleNamespace

    from mrcr_gen import Ask

    ask = Ask(format="poem", entity="cats")
    good = SimpleNamespace(text="a poem", prompt_tokens=1, completion_tokens=2, finish_reason="stop", model="m")
    cache = WritingCache(tmp_path / "cache")
    try:
        with pytest.raises(AttributeError):
            cache.put_all([("k1", "e", "m", {}, ask, 0, good), ("k2", "e", "m", {}, ask, 1, object())])
        assert len(cache) == 0
        cache.put_all([("k1", "e", "m", {}, ask, 0, good)])
        assert len(cache) == 1
    finally:
        cache.close()


@pytest.mark.parametrize("foreign", ["p.parquet", "p.build.json", "p.quality.json"])
def test_import_refuses_an_out_or_companion_it_did_not_write(tmp_path, capsys, foreign):
    export(tmp_path, capsys)
    results = write_lines(tmp_path / "results.jsonl", [vllm_line(r, n) for n, r in enumerate(requests_of(tmp_path))])
    (tmp_path / foreign).write_text("someone else's\n")
    code, _, err = import_free(tmp_path, results, capsys)
    assert code == 2 and foreign in err and len(err.strip().splitlines()) == 1
    assert (tmp_path / foreign).read_text() == "someone else's\n"
    assert {p.name for p in tmp_path.iterdir()} == {
        "requests.jsonl",
        "requests.manifest.json",
        "results.jsonl",
        "cache",
        foreign,
    }
    assert cached(tmp_path) == 0  # nothing stored either: a refused import leaves no trace


def test_import_waits_for_no_build_of_the_same_pool(tmp_path, capsys):
    from mrcr_gen._files import exclusive_lock
    from mrcr_gen.recipes.openai_mrcr._pool_llm import pool_lock_path

    export(tmp_path, capsys)
    results = write_lines(tmp_path / "results.jsonl", [vllm_line(r, n) for n, r in enumerate(requests_of(tmp_path))])
    with exclusive_lock(pool_lock_path(tmp_path / "p.parquet"), "the pool p.parquet"):
        code, _, err = import_free(tmp_path, results, capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "p.parquet" in err
    assert not (tmp_path / "p.parquet").exists() and cached(tmp_path) == 0
    assert import_free(tmp_path, results, capsys)[0] == 0 and len(read_pool(tmp_path / "p.parquet")) == 6
