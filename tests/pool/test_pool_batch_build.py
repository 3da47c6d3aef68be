"""Issue 37 item 2: `mrcr-gen pool build --batch` through the test server's Files and Batches APIs:
the happy path, a kill while polling, an expired batch resent once, --no-wait, the record's rules."""

from __future__ import annotations

import json
import signal

import pytest

from mrcr_gen._prices import CACHED_INPUT_PRICES, PRICES
from mrcr_gen.batch import BatchLimits
from mrcr_gen.cli import gen_main
from mrcr_gen.pool import PoolError, read_pool
from mrcr_gen.pool._batchbuild import batches_path
from mrcr_gen.pool._batchfiles import read_manifest
from mrcr_gen.pool._cache import cache_key
from mrcr_gen.pool._quality import quality_report_path
from mrcr_gen.recipes.openai_mrcr import build_pool_batch, build_pool_openai, plan_asks
from tests.support.chat_server import BatchBehaviour, ChatServer
from tests.support.processes import cli, command_env, stop_while_running

from .writer_server import writer_policy

API_KEY = "sk-test-pool-batch"
FAST = BatchLimits(poll_first_s=0.01, poll_cap_s=0.05)
PLAN = plan_asks(formats=["poem", "riddle"], entities=3, needle_asks=1, needle_variants=3)  # 6 asks, 8 writings
PLAN_ARGS = ["--formats", "poem,riddle", "--entities", "3", "--needle-asks", "1", "--needle-variants", "3"]
MODEL = "gpt-4o"  # a listed price: the cost is at the batch discount of it


def build(server, tmp_path, limits=FAST, **options):
    return build_pool_batch(
        MODEL,
        PLAN,
        out=tmp_path / "p.parquet",
        cache_dir=tmp_path / "cache",
        base_url=server.base_url,
        api_key=API_KEY,
        limits=limits,
        **options,
    )


def uploaded_ids(server) -> list[list[str]]:
    """The custom ids of every batch input file the server received, file by file."""
    files = [f for f in server.files.values() if f["object"]["purpose"] == "batch"]
    return [[json.loads(line)["custom_id"] for line in f["content"].decode().splitlines()] for f in files]


def keys(server, plan=PLAN) -> set[str]:
    return {cache_key(server.base_url, MODEL, {}, ask.text, v) for ask, n in plan.items() for v in range(n)}


def batch_cost(report) -> float:
    """What the report's lines cost at half gpt-4o's list price (cached prompt tokens at the cached price)."""
    (price_in, price_out), cached = PRICES[MODEL], CACHED_INPUT_PRICES[MODEL]
    uncached = report.prompt_tokens - report.cached_tokens
    return (uncached * price_in + report.cached_tokens * cached + report.completion_tokens * price_out) / 2e6


def test_happy_path_split_collected_priced_at_the_discount_and_rerun_free(tmp_path):
    with ChatServer(writer_policy, batches=BatchBehaviour(polls=2)) as server:
        progress, report = build(server, tmp_path, BatchLimits(max_requests=3, poll_first_s=0.01))
        assert server.total_requests == 0  # nothing online
        assert [len(ids) for ids in uploaded_ids(server)] == [3, 3, 2] and server.stats()["batches_created"] == 3
        assert {i for ids in uploaded_ids(server) for i in ids} == keys(server)  # each writing once, keyed by the cache
        assert all(len(body["messages"]) == 1 and body["model"] == MODEL for body in server.batch_requests)
        assert report is not None and (progress.sent, progress.stored, progress.waiting) == (8, 8, 0)
        pool = read_pool(tmp_path / "p.parquet")
        assert len(pool) == 8 and {w.source for w in pool} == {f"{MODEL} @ {server.base_url}"}
        assert quality_report_path(tmp_path / "p.parquet").is_file()
        saved = json.loads((tmp_path / "p.build.json").read_text())
        assert saved["batch"]["lines"] == 8 and saved["batch"]["batches"] == 3 and saved["written"] == 8
        assert saved["batch"]["price_per_1m"]["batch_discount"] == 0.5 and saved["completion_tokens"] > 0
        assert saved["cost_usd"] == pytest.approx(batch_cost(report))
        # A rerun sends nothing and reports the same batches, lines and cost (what a fresh run would).
        _, again = build(server, tmp_path)
        assert server.stats()["batch_requests"] == 8 and server.stats()["batches_created"] == 3
        assert again is not None and (again.written, again.cached, again.cost_usd) == (0, 8, report.cost_usd)
        assert again.batch is not None and again.batch.lines == 8 and again.batch.sent_now == 0
        # The writings are keyed as an online build's: it sends nothing either.
        build_pool_openai(
            MODEL, PLAN, base_url=server.base_url, out=tmp_path / "online.parquet", cache_dir=tmp_path / "cache",
            api_key=API_KEY, progress=False,
        )  # fmt: skip
        assert server.total_requests == 0


def test_an_expired_batch_is_resent_once_by_a_rerun(tmp_path):
    with ChatServer(writer_policy, batches=BatchBehaviour(expire_after=5)) as server:
        progress, report = build(server, tmp_path)
        assert report is not None and len(report.failed) == 3 and progress.stored == 5
        assert all("batch_expired" in f.error for f in report.failed)
        assert len(read_pool(tmp_path / "p.parquet")) == 5  # the others, the failures reported
        (first,) = uploaded_ids(server)
        server.batch_behaviour = BatchBehaviour()
        _, again = build(server, tmp_path)
        assert again is not None and not again.failed and again.written == 3
        second = uploaded_ids(server)[1]
        assert set(second) == set(first[5:]) and len(second) == 3  # only the expired ones, once
        assert server.stats()["batch_requests"] == 11
        assert len(read_pool(tmp_path / "p.parquet")) == 8
        assert again.batch is not None and (again.batch.lines, again.batch.failed_lines) == (8, 3)


def test_no_wait_submits_then_a_rerun_collects(tmp_path, capsys):
    out = tmp_path / "p.parquet"
    with ChatServer(writer_policy, batches=BatchBehaviour(hold=True)) as server:
        args = ["pool", "build", "--model", MODEL, "--base-url", server.base_url, "--out", out, *PLAN_ARGS]
        args = [str(a) for a in [*args, "--cache-dir", tmp_path / "cache", "--batch", "--poll-interval", "0.01"]]
        code, err = run([*args, "--no-wait"], capsys)
        assert code == 1 and "8 requests are in batches still running (8 sent now" in err
        assert not out.exists() and not (tmp_path / "p.build.json").exists()
        code, err = run([*args, "--no-wait"], capsys)  # still running: nothing sent again
        assert code == 1 and "(0 sent now" in err
        server.release_batches()
        code, err = run(args, capsys)
        assert code == 0, err
        assert server.stats()["batches_created"] == 1 and server.stats()["batch_requests"] == 8
    assert len(read_pool(out)) == 8 and "through the Batch API" in err


def run(args, capsys):
    with pytest.raises(SystemExit) as exit_info:
        gen_main(args)
    return exit_info.value.code or 0, capsys.readouterr().err


def test_kill_while_polling_then_a_rerun_bills_no_line_twice(tmp_path, capsys):
    """A real `mrcr-gen pool build --batch` SIGKILLed while it polls; the rerun polls the batch it made."""
    out = tmp_path / "p.parquet"
    with ChatServer(writer_policy, batches=BatchBehaviour(hold=True)) as server:
        args = ["pool", "build", "--model", MODEL, "--base-url", server.base_url, "--out", str(out), *PLAN_ARGS]
        args += ["--cache-dir", str(tmp_path / "cache"), "--batch", "--poll-interval", "0.05"]
        stopped = stop_while_running(
            cli("mrcr-gen", *args),
            tmp_path,
            signal.SIGKILL,
            lambda _: server.api_calls["retrieve"] >= 2,
            env=command_env(OPENAI_API_KEY=API_KEY),
        )
        assert stopped.returncode == -signal.SIGKILL and not out.exists()
        server.release_batches()
        code, err = run([*args, "--poll-interval", "0.01"], capsys)
        assert code == 0, err
        stats = server.stats()
    # the server received every batch line once: one upload, one batch
    assert (stats["batches_created"], stats["api_calls"]["upload"], stats["batch_requests"]) == (1, 1, 8)
    saved = json.loads((tmp_path / "p.build.json").read_text())
    assert saved["batch"]["lines"] == 8 and saved["written"] == 8 and len(read_pool(out)) == 8


def test_killed_between_storing_and_recording_nothing_is_stored_or_costed_twice(tmp_path):
    with ChatServer(writer_policy) as server:
        _, report = build(server, tmp_path)
        state_path = batches_path(tmp_path / "p.parquet") / "batches.json"
        state = json.loads(state_path.read_text())
        state["parts"][0]["graded"] = False  # as if killed after the cache's commit, before the record
        state_path.write_text(json.dumps(state))
        _, again = build(server, tmp_path)
        assert server.stats()["batch_requests"] == 8
    assert report is not None and again is not None
    assert (again.written, again.cached, again.cost_usd) == (0, 8, report.cost_usd)


def test_killed_between_upload_and_batch_the_batch_is_adopted(tmp_path):
    with ChatServer(writer_policy, batches=BatchBehaviour(hold=True)) as server:
        progress, report = build(server, tmp_path, wait=False)
        assert report is None and progress.waiting == 8
        state_path = batches_path(tmp_path / "p.parquet") / "batches.json"
        state = json.loads(state_path.read_text())
        state["parts"][0].update(batch_id=None, status=None)  # the id never reached the record
        state_path.write_text(json.dumps(state))
        server.release_batches()
        _, report = build(server, tmp_path)
        stats = server.stats()
    assert report is not None and report.written == 8
    assert (stats["batches_created"], stats["batch_requests"], stats["api_calls"]["list"]) == (1, 8, 1)


def test_other_options_on_the_same_batches_are_refused(tmp_path, capsys):
    with ChatServer(writer_policy, batches=BatchBehaviour(hold=True)) as server:
        build(server, tmp_path, wait=False)
        # an online build of the pool would send (and pay) its running batches' writings again
        with pytest.raises(PoolError, match=r"8 writings of .* are in batches still running"):
            build_pool_openai(MODEL, PLAN, base_url=server.base_url, out=tmp_path / "p.parquet", api_key=API_KEY)
        assert server.total_requests == 0
        args = ["pool", "build", "--model", MODEL, "--base-url", server.base_url, "--out", tmp_path / "p.parquet"]
        args += [*PLAN_ARGS, "--cache-dir", tmp_path / "cache", "--batch", "--temperature", "0.5"]
        code, err = run([str(a) for a in args], capsys)
        assert code == 2 and err.count("\n") == 1 and "rerun with those options" in err
        assert server.stats()["batch_requests"] == 8


def test_a_build_with_every_writing_cached_sends_nothing_and_leaves_the_folder_reusable(tmp_path, capsys):
    with ChatServer(writer_policy) as server:
        build_pool_openai(
            MODEL, PLAN, base_url=server.base_url, out=tmp_path / "online.parquet", cache_dir=tmp_path / "cache",
            api_key=API_KEY, progress=False,
        )  # fmt: skip
        for _ in range(2):
            progress, report = build(server, tmp_path, wait=False)
            assert report is not None and (report.cached, report.written, progress.sent) == (8, 0, 0)
            assert report.batch is not None and report.batch.lines == 0 and report.cost_usd == 0
        # no batch was ever made: other options may take the folder over
        _, report = build(server, tmp_path, params={"temperature": 0.5})
        assert report is not None and report.written == 8 and server.stats()["batch_requests"] == 8


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--batch", "--concurrency", "4"], "--concurrency has no meaning with --batch"),
        (["--batch", "--concurrency", "16"], "--concurrency has no meaning with --batch"),
        (["--no-wait"], "--wait/--no-wait and --poll-interval go with --batch"),
        (["--wait"], "--wait/--no-wait and --poll-interval go with --batch"),
        (["--poll-interval", "10"], "--wait/--no-wait and --poll-interval go with --batch"),  # the default, given
    ],
)
def test_options_the_command_cannot_honour_are_refused(tmp_path, capsys, extra, message):
    args = ["pool", "build", "--model", MODEL, "--base-url", "http://127.0.0.1:9/v1", "--out", tmp_path / "p.parquet"]
    code, err = run([str(a) for a in [*args, *PLAN_ARGS, *extra]], capsys)
    assert code == 2 and message in err and not (tmp_path / "p.parquet").exists()


def test_a_folder_of_other_files_is_refused(tmp_path, capsys):
    folder = batches_path(tmp_path / "p.parquet")
    folder.mkdir()
    (folder / "mine.txt").write_text("mine")
    args = ["pool", "build", "--model", MODEL, "--base-url", "http://127.0.0.1:9/v1", "--out", tmp_path / "p.parquet"]
    code, err = run([str(a) for a in [*args, *PLAN_ARGS, "--batch"]], capsys)
    assert code == 2 and "holds files this command did not write" in err
    assert (folder / "mine.txt").read_text() == "mine"


@pytest.mark.parametrize("foreign", ["p.parquet", "p.build.json", "p.quality.json"])
def test_a_pool_or_report_we_did_not_write_is_refused_before_any_upload(tmp_path, capsys, foreign):
    (tmp_path / foreign).write_text("not ours")
    with ChatServer(writer_policy) as server:
        args = ["pool", "build", "--batch", "--model", MODEL, "--base-url", server.base_url, "--out", tmp_path / "p.parquet"]
        code, err = run([str(a) for a in [*args, *PLAN_ARGS]], capsys)
        assert server.stats()["total_requests"] == 0
    assert code == 2 and f"refusing to overwrite {tmp_path / foreign}" in err and len(err.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [foreign] and (tmp_path / foreign).read_text() == "not ours"


def test_a_failed_batch_is_reported_and_its_writings_resent_by_a_rerun(tmp_path, capsys):
    out = tmp_path / "p.parquet"
    with ChatServer(writer_policy, batches=BatchBehaviour(fail="token_limit_exceeded")) as server:
        args = ["pool", "build", "--batch", "--model", MODEL, "--base-url", server.base_url, "--out", out, *PLAN_ARGS]
        args = [str(a) for a in [*args, "--cache-dir", tmp_path / "cache", "--poll-interval", "0.01"]]
        code, err = run(args, capsys)
        assert code == 1 and "token_limit_exceeded" in err
        assert "the pool is incomplete: 8 of 8 writings failed" in err.splitlines()[-1]
        assert len(read_pool(out)) == 0  # the pool of the writings there are: none yet
        saved = json.loads((tmp_path / "p.build.json").read_text())
        assert (saved["batch"]["lines"], saved["batch"]["failed_lines"], saved["cost_usd"]) == (0, 8, 0)
        server.batch_behaviour = BatchBehaviour()
        code, err = run(args, capsys)
        assert code == 0, err
        # the failed batch's 8 requests sent again once (a failed batch bills nothing)
        assert server.stats()["batch_requests"] == 16 and server.stats()["batches_created"] == 2
    assert len(read_pool(out)) == 8


def test_two_pools_sharing_a_cache_never_send_a_writing_twice(tmp_path):
    """A second pool of the same writings, built while the first one's batches run, sends none of
    them: it waits for them (exit 1 naming the first pool's batches) and, once the first build has
    collected them, takes them from the cache."""
    with ChatServer(writer_policy, batches=BatchBehaviour(hold=True)) as server:
        progress, report = build(server, tmp_path, wait=False)
        assert report is None and progress.sent == 8
        second = {"out": tmp_path / "q.parquet", "cache_dir": tmp_path / "cache", "base_url": server.base_url}
        progress, report = build_pool_batch(MODEL, PLAN, **second, api_key=API_KEY, limits=FAST, wait=False)
        assert report is None and progress.sent == 0 and progress.waiting == 8
        assert set(progress.elsewhere.values()) == {batches_path(tmp_path / "p.parquet").resolve()}
        progress, report = build_pool_batch(MODEL, PLAN, **second, api_key=API_KEY, limits=FAST)  # waits: no
        assert report is None and progress.sent == 0
        server.release_batches()
        build(server, tmp_path)  # the first build collects its batches
        _, report = build_pool_batch(MODEL, PLAN, **second, api_key=API_KEY, limits=FAST)
        stats = server.stats()
    assert report is not None and (report.cached, report.written) == (8, 0)
    assert (stats["batches_created"], stats["batch_requests"]) == (1, 8)


def test_export_requests_leaves_out_writings_in_running_batches(tmp_path, capsys):
    """`pool export-requests` for the endpoint of a running `pool build --batch` does not request
    its writings again (they would be paid twice); importing its output reports them as not in the
    pool (exit 1) until that build has collected them."""
    from .test_pool_batchfiles import vllm_line, write_lines

    wider = [*PLAN_ARGS[:-1], "4"]  # the batch build's 8 writings and one more needle variant
    requests, results, out = tmp_path / "r.jsonl", tmp_path / "results.jsonl", tmp_path / "imported.parquet"
    common = ["--cache-dir", tmp_path / "cache", "--price-in", "0", "--price-out", "0"]
    with ChatServer(writer_policy, batches=BatchBehaviour(hold=True)) as server:
        build(server, tmp_path, wait=False)
        args = ["pool", "export-requests", "--model", MODEL, "--endpoint", server.base_url, "--out", requests]
        code, out_text, err = run_out([*args, "--cache-dir", tmp_path / "cache", *wider], capsys)
        assert code == 0 and "8 in batches not collected yet" in out_text, err
        lines = [json.loads(line) for line in requests.read_text().splitlines()]
        assert len(lines) == 1 and read_manifest(requests).in_batches == 8
        write_lines(results, [vllm_line(lines[0], 1, model=MODEL)])
        imported = ["pool", "import-results", results, "--requests", requests, "--out", out, *common]
        code, _, err = run_out(imported, capsys)
        assert code == 1 and err.count("(in batches not collected when exported)") == 5, err
        assert len(read_pool(out)) == 1
        server.release_batches()
        build(server, tmp_path)  # the batch build collects its writings
        code, _, err = run_out(imported, capsys)
        assert code == 0 and len(read_pool(out)) == 9, err
        assert server.stats()["batch_requests"] == 8


def run_out(args, capsys):
    with pytest.raises(SystemExit) as exit_info:
        gen_main([str(a) for a in args])
    captured = capsys.readouterr()
    return exit_info.value.code or 0, captured.out, captured.err


def test_an_online_build_of_another_pool_refuses_writings_held_by_running_batches(tmp_path):
    with ChatServer(writer_policy, batches=BatchBehaviour(hold=True)) as server:
        build(server, tmp_path, wait=False)
        with pytest.raises(PoolError, match="8 of these writings are in batches not collected yet"):
            build_pool_openai(
                MODEL, PLAN, out=tmp_path / "q.parquet", cache_dir=tmp_path / "cache", base_url=server.base_url,
                api_key=API_KEY, progress=False,
            )  # fmt: skip
        assert server.total_requests == 0 and not (tmp_path / "q.parquet").exists()


def test_a_batch_made_but_whose_answer_was_lost_is_adopted_not_made_twice(tmp_path):
    """The API makes the batch but its answer comes after the client's timeout: the retry finds
    that batch instead of making (and billing) a second one."""
    from tests.support.chat_server import Fault

    lost = BatchBehaviour(api_faults={"create": {1: Fault("stall")}})
    with ChatServer(writer_policy, batches=lost) as server:
        try:
            progress, report = build(server, tmp_path, timeout=0.5)
        finally:
            server.unstall()
        stats = server.stats()
    assert report is not None and report.written == 8 and progress.batches == 1
    assert (stats["batches_created"], stats["batch_requests"], stats["api_calls"]["create"]) == (1, 8, 1)


def test_a_vanished_batch_is_sent_again_once_and_said(tmp_path):
    """Issue 34 item 4 on the same BatchFolder: a batch the server no longer has (404) is not an
    error; its writings are sent again once, and the build says so."""
    with ChatServer(writer_policy, batches=BatchBehaviour(hold=True)) as server:
        progress, report = build(server, tmp_path, wait=False)
        assert report is None and progress.waiting == 8
        server.batches.clear()
        server.release_batches()
        progress, report = build(server, tmp_path)
        assert report is not None and report.written == 8
        assert server.stats()["batch_requests"] == 16 and server.api_calls["create"] == 2
    assert [line for line in progress.problems if "is gone from the server (404)" in line]
