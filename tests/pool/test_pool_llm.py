"""The LLM writer against a real OpenAI-compatible HTTP server on 127.0.0.1 (tests/support/chat_server.py)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mrcr_gen import Ask
from mrcr_gen.cli import gen_main
from mrcr_gen.pool import PoolTooSmall, PoolWriter, PoolWriting, read_pool
from mrcr_gen.pool._cache import CACHE_FILE
from mrcr_gen.recipes.openai_mrcr._pool_llm import build_pool_openai, plan_asks
from mrcr_gen.recipes.openai_mrcr._shortcut import build_pool_for_request, check_pool, repeated_asks, request_plan
from tests.support.chat_server import ChatServer, Fault

from .pool_checks import check_dataset
from .writer_server import writer_policy

CANARY = "sk-mrcr-CANARY-7f3a9e1d5b2c"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)


def build(server, plan, tmp_path, **kw):
    kw = {"concurrency": 4, "timeout": 5.0, "backoff_base": 0.05, "progress": False} | kw
    return build_pool_openai(
        "test-model", plan, base_url=server.base_url, out=tmp_path / "pool.parquet", cache_dir=tmp_path / "cache", **kw
    )


def assert_no_key_in(directory: Path) -> None:
    for path in directory.rglob("*"):
        if path.is_file():
            assert CANARY.encode() not in path.read_bytes(), path


def test_every_response_that_came_back_is_billed(tmp_path):
    """Empty replies are retried, but a provider bills them: their usage counts, in the report,
    the cost and the build report."""
    plan = plan_asks(formats=["poem"], entities=4)
    with ChatServer(writer_policy, {1: Fault.empty(), 2: Fault.empty(), 4: Fault.empty()}) as server:
        report = build(server, plan, tmp_path, concurrency=1, price=(2.0, 10.0))
        sent = server.stats()
    assert report.written == 4 and report.http_requests == sent["total_requests"] == 7 and report.retries == 3
    assert report.responses == {"200": 7}
    assert sent["usage_sent"]["prompt_tokens"] > 0 and sent["usage_sent"]["completion_tokens"] > 0
    assert (report.prompt_tokens, report.completion_tokens) == (
        sent["usage_sent"]["prompt_tokens"],
        sent["usage_sent"]["completion_tokens"],
    )
    assert report.cost_usd == pytest.approx((2.0 * report.prompt_tokens + 10.0 * report.completion_tokens) / 1e6)
    built = json.loads((tmp_path / "pool.build.json").read_text())
    assert (built["prompt_tokens"], built["retries"], built["cost_usd"]) == (
        report.prompt_tokens,
        3,
        report.cost_usd,
    )


def test_the_cost_of_a_pool_build_is_the_usage_ledgers(tmp_path):
    """Issue 34 (one ledger): a pool build prices cached prompt tokens at the cached price, as an
    eval run does (`_usage.cost`), not as plain input."""
    from mrcr_gen._usage import Usage, cost

    plan = plan_asks(formats=["poem"], entities=4)
    price = {"input": 2.0, "cached_input": 0.5, "output": 10.0}
    with ChatServer(writer_policy, cached_share=0.5) as server:
        report = build(server, plan, tmp_path, price=price)
    assert report.cached_tokens > 0
    usage = Usage(report.prompt_tokens, report.completion_tokens, report.reasoning_tokens, report.cached_tokens)
    expected = (2.0 * (report.prompt_tokens - report.cached_tokens) + 0.5 * report.cached_tokens
                + 10.0 * report.completion_tokens) / 1e6  # fmt: skip
    assert report.cost_usd == cost(price, usage)["cost_usd"] == pytest.approx(expected)


def test_gets_through_every_fault(tmp_path):
    plan = plan_asks(formats=["poem", "riddle"], entities=4, needle_asks=1, needle_variants=3)
    faults = {1: Fault.rate_limit(retry_after=1), 2: Fault.server_error(), 3: Fault.slow(2.0), 4: Fault.malformed(), 5: Fault.empty()}
    with ChatServer(writer_policy, faults) as server:
        started = time.perf_counter()
        report = build(server, plan, tmp_path, concurrency=1, timeout=0.5)
        elapsed = time.perf_counter() - started
        stats = server.stats()
    assert report.failed == () and report.written == report.requested == 10
    assert stats["faults_served"] == {"429": 1, "500": 1, "slow": 1, "malformed": 1, "empty": 1}
    assert report.http_requests == stats["total_requests"] == 15
    assert elapsed >= 1.0  # Retry-After: 1 honoured
    # Every request is accounted for by what came back (the slow one timed out: no response).
    assert report.responses == {"200": 11, "429": 1, "500": 1, "no response": 1, "unreadable body": 1}
    assert report.retries == 5
    pool = read_pool(tmp_path / "pool.parquet")
    assert len(pool) == 10 and all(w.text.startswith(f"Here is a {w.ask[8:]}") for w in pool)
    assert {w.source for w in pool} == {f"test-model @ {server.base_url}"}  # the model and the server that wrote
    built = json.loads((tmp_path / "pool.build.json").read_text())
    assert built == json.loads(report.model_dump_json())
    assert built["endpoint"] == server.base_url and built["responses"]["200"] == 11


def test_server_sees_the_exact_ask_and_concurrency_is_bounded(tmp_path):
    plan = plan_asks(formats=["short essay", "email", "song"], entities=12, needle_asks=2, needle_variants=4)
    with ChatServer(writer_policy, delay=0.05) as server:
        report = build(server, plan, tmp_path, concurrency=3, params={"temperature": 1.0})
        requests = list(server.requests)
        stats = server.stats()
        auth = set(server.authorizations)
    assert report.requested == 36 + 2 * 3 and report.failed == ()
    assert all(r["messages"] == [{"role": "user", "content": r["messages"][0]["content"]}] for r in requests)
    assert all(r["model"] == "test-model" and r["temperature"] == 1.0 for r in requests)
    assert stats["per_last_user"] == {ask.text: n for ask, n in plan.items()}
    assert all(text.startswith("write a ") and " about " in text for text in stats["per_last_user"])
    assert 2 <= stats["max_in_flight"] <= 3 and report.max_in_flight <= 3
    assert auth == {f"Bearer {CANARY}"}  # the key is sent to the server ...
    assert_no_key_in(tmp_path)  # ... and nowhere else


def test_a_reply_no_file_can_hold_is_a_failed_writing_that_a_rerun_asks_again(tmp_path):
    """A lone surrogate is valid JSON ("\\ud83d") but no pool file or cache can store it: that
    writing fails with a message saying so, the others are kept, nothing crashes, the reply is
    billed, and a rerun asks for that writing alone."""
    plan = plan_asks(formats=["poem"], entities=4)
    broken = next(iter(plan)).text
    bad = {"on": True}

    def policy(messages, body):
        text = writer_policy(messages, body)
        return text + "\ud83d" if bad["on"] and messages[-1]["content"] == broken else text

    with ChatServer(policy) as server:
        report = build(server, plan, tmp_path)
        assert [f.ask for f in report.failed] == [broken] and "UTF-8 cannot store" in report.failed[0].error
        assert report.written == 3 and report.responses == {"200": 4} and report.completion_tokens > 0
        assert len(read_pool(tmp_path / "pool.parquet")) == 3
        bad["on"] = False
        server.reset()
        report = build(server, plan, tmp_path)
        assert server.stats()["per_last_user"] == {broken: 1}
        assert report.cached == 3 and report.written == 1 and report.failed == ()


def test_rerun_costs_nothing_and_failures_are_reported(tmp_path):
    plan = plan_asks(formats=["poem"], entities=6)
    broken = next(iter(plan)).text

    def faults(number, body):
        return Fault.server_error() if body["messages"][-1]["content"] == broken else None

    with ChatServer(writer_policy, faults) as server:
        report = build(server, plan, tmp_path, max_retries=2)
        assert [f.ask for f in report.failed] == [broken] and "500" in report.failed[0].error
        assert server.stats()["per_last_user"][broken] == 3  # 1 + 2 retries
        assert len(read_pool(tmp_path / "pool.parquet")) == 5
        server.faults = None
        server.reset()
        report = build(server, plan, tmp_path)
        assert server.stats()["per_last_user"] == {broken: 1}  # only the missing writing
        assert report.cached == 5 and report.written == 1 and report.failed == ()
        first = (tmp_path / "pool.parquet").read_bytes()
        server.reset()
        report = build(server, plan, tmp_path)
        assert server.stats()["total_requests"] == 0 and report.cached == 6 and report.cost_usd is None
        assert (tmp_path / "pool.parquet").read_bytes() == first


def cached_asks(cache_dir: Path) -> dict[str, int]:
    with sqlite3.connect(cache_dir / CACHE_FILE) as db:
        return dict(db.execute("SELECT ask, COUNT(*) FROM writings GROUP BY ask").fetchall())


def cli(*args: str) -> list[str]:
    return [sys.executable, "-c", "from mrcr_gen.cli import gen_main; gen_main()", *args]


def subprocess_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_BASE_URL"}
    env["OPENAI_API_KEY"] = CANARY
    env["PYTHONPATH"] = str(ROOT)
    return env


@pytest.mark.slow
def test_killed_build_resumes_without_rerequesting(tmp_path):
    cache, pool = tmp_path / "cache", tmp_path / "pool.parquet"
    args = cli(
        "pool", "build", "--writer", "openai", "--model", "test-model", "--formats", "poem,riddle", "--entities", "30",
        "--needle-asks", "2", "--needle-variants", "3", "--concurrency", "2", "--cache-dir", str(cache), "--out", str(pool),
        "--price-in", "2.5", "--price-out", "10",
    )
    outputs = []
    with ChatServer(writer_policy, delay=0.1) as server:
        args[args.index("--formats"):args.index("--formats")] = ["--base-url", server.base_url]
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=subprocess_env(), cwd=tmp_path)
        deadline = time.time() + 60
        while server.stats()["completed_requests"] < 12 and time.time() < deadline:
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        outputs += proc.communicate(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        assert not pool.exists()
        before = server.stats()["per_last_user"]
        finished = cached_asks(cache)
        assert 8 <= sum(finished.values()) < 64  # killed midway, finished writings stored

        done = subprocess.run(args, capture_output=True, env=subprocess_env(), cwd=tmp_path, timeout=120)
        outputs += [done.stdout, done.stderr]
        assert done.returncode == 0, done.stderr.decode()
        after = server.stats()["per_last_user"]
        # the resumed run asked exactly for the writings missing from the cache: finished ones
        # were not requested again, ones in flight at the kill were
        plan = {a.text: n for a, n in plan_asks(formats=["poem", "riddle"], entities=30, needle_asks=2, needle_variants=3).items()}
        assert sum(plan.values()) == 64
        for ask, n in plan.items():
            assert after[ask] - before.get(ask, 0) == n - finished.get(ask, 0), ask
        assert len(read_pool(pool)) == 64
        assert b"from cache" in done.stderr

        server.reset()
        again = subprocess.run(args, capture_output=True, env=subprocess_env(), cwd=tmp_path, timeout=120)
        outputs += [again.stdout, again.stderr]
        assert again.returncode == 0 and server.stats()["total_requests"] == 0
        assert b"0 written now, 64 from cache" in again.stderr
    assert not any(CANARY.encode() in out for out in outputs)
    assert_no_key_in(tmp_path)


@pytest.mark.slow
def test_writer_openai_shortcut_generates_valid_rows(tmp_path):
    cache, out = tmp_path / "cache", tmp_path / "ds"
    with ChatServer(writer_policy) as server:
        args = cli(
            "--writer", "openai", "--model", "test-model", "--base-url", server.base_url, "--bin", "8192",
            "--needles", "2", "--needles", "4", "--samples", "2", "--cache-dir", str(cache), "--out", str(out),
            "--concurrency", "4",
        )
        first = subprocess.run(args, capture_output=True, env=subprocess_env(), cwd=tmp_path, timeout=300)
        assert first.returncode == 0, first.stderr.decode()
        requests = list(server.requests)
        assert requests and all(len(r["messages"]) == 1 and r["messages"][0]["content"].startswith("write a ") for r in requests)
        assert check_dataset(out) == 4
        card = (out / "README.md").read_text()
        assert '"name": "pool"' in card and f'"sources": {{"test-model @ {server.base_url}"' in card
        server.reset()
        second = subprocess.run(args[:-6] + ["--cache-dir", str(cache), "--out", str(tmp_path / "ds2"), "--concurrency", "4"],
                                capture_output=True, env=subprocess_env(), cwd=tmp_path, timeout=300)
        assert second.returncode == 0 and server.stats()["total_requests"] == 0  # a rerun costs nothing
    for proc in (first, second):
        assert CANARY.encode() not in proc.stdout + proc.stderr
    assert_no_key_in(tmp_path)


def test_writer_openai_shortcut_reports_too_few_distinct_writings(tmp_path, capsys):
    with ChatServer(lambda messages, body: "always the same text") as server:
        with pytest.raises(SystemExit) as exit_info:
            gen_main([
                "--writer", "openai", "--model", "test-model", "--base-url", server.base_url, "--bin", "8192",
                "--needles", "2", "--samples", "1", "--cache-dir", str(tmp_path / "c"), "--out", str(tmp_path / "o"),
            ])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    last = err.strip().splitlines()[-1]
    assert last.startswith("mrcr-gen: error: pool has no ask with 2 distinct writings (most: 1 for")
    assert last.endswith("try a higher --temperature")  # the model really wrote identical texts
    assert CANARY not in err


def test_missing_key_and_model_are_one_line_errors(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    for args, message in [
        (["--writer", "openai", "--bin", "8192"], "--writer openai needs --model"),
        (["--writer", "openai", "--model", "gpt-4o", "--bin", "8192", "--cache-dir", str(tmp_path)], "no API key"),
        (["pool", "build", "--model", "m", "--formats", "limerick", "--out", str(tmp_path / "p.parquet")], "unknown format(s) 'limerick'"),
    ]:
        with pytest.raises(SystemExit) as exit_info:
            gen_main(args)
        err = capsys.readouterr().err
        assert exit_info.value.code == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_writer_openai_shortcut_with_one_sample(tmp_path, capsys):
    """Regression: one row used to plan a single ask with 2+ writings, too few for the preamble."""
    out = tmp_path / "ds"
    with ChatServer(writer_policy) as server:
        with pytest.raises(SystemExit) as exit_info:
            gen_main([
                "--writer", "openai", "--model", "test-model", "--base-url", server.base_url, "--needles", "8",
                "--bin", "8192", "--samples", "1", "--cache-dir", str(tmp_path / "c"), "--out", str(out),
            ])
        per_ask = server.stats()["per_last_user"]
    err = capsys.readouterr().err
    assert exit_info.value.code == 0, err
    assert "temperature" not in err
    assert sorted(per_ask.values(), reverse=True)[:3] == [8, 8, 1]  # two needle asks, then distractors
    assert check_dataset(out) == 1


def test_build_pool_for_request_is_usable_for_one_row(tmp_path):
    reports = []
    with ChatServer(writer_policy) as server:
        path = build_pool_for_request(
            model="test-model", seed=5, needles=(2,), max_tokens=8192, rows=1, where="bin 8192",
            cache_dir=tmp_path / "c", base_url=server.base_url, concurrency=4, progress=False, on_report=reports.append,
        )
        requests = server.stats()["total_requests"]
        assert path.parent == tmp_path / "c" / "pools" and path.name.startswith("test-model-")
        check_pool(PoolWriter.from_file(path), (2,), 8192, "bin 8192")
        assert reports and reports[-1].tokens >= 8192 and sum(r.written for r in reports) == requests
        server.reset()
        again = build_pool_for_request(  # same request: the same cached pool, no request
            model="test-model", seed=5, needles=(2,), max_tokens=8192, rows=1, cache_dir=tmp_path / "c",
            base_url=server.base_url, progress=False,
        )
        assert again == path and server.stats()["total_requests"] == 0
    with ChatServer(writer_policy) as other:  # another server, same model name: its own pool and writings
        elsewhere = build_pool_for_request(
            model="test-model", seed=5, needles=(2,), max_tokens=8192, rows=1, cache_dir=tmp_path / "c",
            base_url=other.base_url, progress=False,
        )
        assert elsewhere != path and other.stats()["total_requests"] > 0  # nothing came from the first server
    assert {w.source for w in read_pool(elsewhere)} == {f"test-model @ {other.base_url}"}


def test_request_plan_always_has_two_needle_asks():
    for rows in (1, 2, 5, 100):
        plan, count, needle_asks = request_plan(seed=0, needles=(8,), max_tokens=8192, rows=rows)
        assert needle_asks == min(max(rows, 2), 32)
        assert [n for _, n in plan[:needle_asks]] == [8] * needle_asks and plan[needle_asks][1] == 1
        assert count > needle_asks
    plan, _, _ = request_plan(seed=0, needles=(1,), max_tokens=8192, rows=1, per_pair=3)
    assert [n for _, n in plan[:3]] == [3, 3, 3]  # never fewer than per_pair, nor than 2


def test_temperature_hint_only_when_the_model_repeated_itself(tmp_path):
    ask, other = (Ask(format="poem", entity=e) for e in ("the sea", "a fox"))
    pool = PoolWriter([PoolWriting.make(ask, f"text {i}", 3, "m") for i in range(2)] + [PoolWriting.make(other, "x", 1, "m")])
    assert repeated_asks(pool, {ask: 2, other: 1}) == []
    assert repeated_asks(pool, {ask: 4, other: 1}) == [(ask, 2, 4)]
    with ChatServer(lambda messages, body: "always the same text") as server:
        with pytest.raises(PoolTooSmall, match=r"\('write a .*': 1 distinct of 2 requested.*try a higher --temperature$"):
            build_pool_for_request(
                model="test-model", needles=(2,), max_tokens=8192, rows=1, cache_dir=tmp_path / "c",
                base_url=server.base_url, progress=False,
            )


@pytest.mark.parametrize("field", ["max_tokens", "max_completion_tokens"])
def test_pool_build_max_tokens_field(tmp_path, capsys, field):
    with ChatServer(writer_policy) as server:
        with pytest.raises(SystemExit) as exit_info:
            gen_main([
                "pool", "build", "--writer", "openai", "--model", "test-model", "--base-url", server.base_url,
                "--formats", "poem", "--entities", "2", "--needle-asks", "0", "--max-tokens", "77",
                "--max-tokens-field", field, "--cache-dir", str(tmp_path / "c"), "--out", str(tmp_path / "p.parquet"),
            ])
        assert exit_info.value.code == 0, capsys.readouterr().err
        other = {"max_tokens", "max_completion_tokens"} - {field}
        assert server.requests and all(r[field] == 77 and not other & set(r) for r in server.requests)
    with pytest.raises(SystemExit) as exit_info:
        gen_main(["pool", "build", "--model", "m", "--max-tokens-field", "tokens", "--out", str(tmp_path / "q.parquet")])
    assert exit_info.value.code == 2 and "--max-tokens-field" in capsys.readouterr().err


# ------------------------------------------------------------------ writings keyed by their endpoint


def test_two_servers_serving_one_model_name_never_share_writings(tmp_path):
    """The cache key holds the endpoint: a second server under the same model name is asked for
    its own writings, and the pool says which server wrote them."""
    plan = plan_asks(formats=["poem"], entities=3)
    with ChatServer(lambda messages, body: "from server A " + messages[-1]["content"]) as a:
        first = build(a, plan, tmp_path)
    with ChatServer(lambda messages, body: "from server B " + messages[-1]["content"]) as b:
        second = build(b, plan, tmp_path)
        sent = b.stats()["total_requests"]
    assert (first.written, second.written, second.cached, sent) == (3, 3, 0, 3)
    pool = read_pool(tmp_path / "pool.parquet")
    assert {w.source for w in pool} == {f"test-model @ {b.base_url}"}
    assert all(w.text.startswith("from server B") for w in pool)
    with ChatServer(lambda messages, body: "from server B " + messages[-1]["content"]) as b_again:
        # the same URL written differently (upper-case scheme, trailing slash) is the same endpoint
        url = b.base_url.replace("http://", "HTTP://") + "/"
        again = build_pool_openai(
            "test-model", plan, base_url=url, out=tmp_path / "p3.parquet", cache_dir=tmp_path / "cache", progress=False
        )
    assert again.endpoint == b.base_url and (again.written, again.cached) == (0, 3) and b_again.total_requests == 0


def test_endpoint_is_normalised_and_never_holds_a_key(monkeypatch):
    from mrcr_gen._openai import endpoint

    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert endpoint(None) == "https://api.openai.com/v1"
    assert endpoint("HTTP://LocalHost:8000/v1/") == "http://localhost:8000/v1"
    monkeypatch.setenv("OPENAI_BASE_URL", "https://openrouter.ai/api/v1/")
    assert endpoint(None) == "https://openrouter.ai/api/v1"


def test_a_cache_of_an_older_version_is_refused_with_how_to_rebuild(tmp_path, capsys):
    cache = tmp_path / "cache"
    cache.mkdir()
    with sqlite3.connect(cache / "writings.sqlite3") as db:  # the schema before writings were keyed by endpoint
        db.execute(
            "CREATE TABLE writings (key TEXT PRIMARY KEY, model TEXT NOT NULL, params TEXT NOT NULL, ask TEXT NOT NULL,"
            " variant INTEGER NOT NULL, text TEXT NOT NULL, prompt_tokens INTEGER, completion_tokens INTEGER,"
            " finish_reason TEXT, served_model TEXT, created REAL NOT NULL)"
        )
    with pytest.raises(SystemExit) as exit_info:
        gen_main(["pool", "build", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--entities", "1",
                  "--cache-dir", str(cache), "--out", str(tmp_path / "p.parquet")])
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and not (tmp_path / "p.parquet").exists()
    assert err == (
        f"mrcr-gen: error: {cache / 'writings.sqlite3'} holds writings cached by an older mrcr-gen, which did not "
        "record the server that wrote them; rebuild them in another cache (--cache-dir DIR, or MRCR_GEN_CACHE), or "
        "delete that file"
    )
