"""The v2 LLM writer against the project's chat server: v2 wording, distinct variants, cache."""

from __future__ import annotations

from mrcr_gen.recipes.mrcr_v2 import V2Config, generate_v2, load_v2_catalog, v2_bucket, validate_v2_paths
from mrcr_gen.recipes.mrcr_v2._llm import V2OpenAIWriter
from tests.pool.writer_server import writer_policy
from tests.support.chat_server import ChatServer


def small_catalog():
    full = load_v2_catalog()
    return full.model_copy(update={
        "formats": tuple(f for f in full.formats if f.name in ("tweet", "riddle")),
        "needle_topics": full.needle_topics[:2],
        "filler_topics": full.filler_topics[:2],
        "fewshot_topics": full.fewshot_topics[:3],
        "styles": {k: full.styles[k] for k in ("formal", "archaic")},
    })


def test_llm_writer_asks_with_v2_wording_and_caches(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-v2")
    catalog = small_catalog()
    with ChatServer(writer_policy) as server:
        writer = V2OpenAIWriter("test-model", base_url=server.base_url, cache_dir=tmp_path / "cache", catalog=catalog)
        keys = writer.catalog_keys()
        writer.prefetch(keys)
        assert server.total_requests == len(keys) == (8 + 8 + 2 * 3 * 4) * 8
        asks = [r["messages"][0]["content"] for r in server.requests]
        assert all(len(r["messages"]) == 1 for r in server.requests)
        first_lines = {a.split("\n\n")[0] for a in asks}
        assert first_lines == {key.ask for key, _ in keys}
        assert "Write a tweet about lighthouses in formal style." in first_lines

        config = V2Config(needles=(4,), buckets=(v2_bucket(8192),), samples=3, out=tmp_path / "data")
        generate_v2(config, writer)
        report = validate_v2_paths([tmp_path / "data" / "4needle" / "mrcr_v2_4needle_in_(4096,8192).csv"]).report
        assert report.summary.rows == 3 and report.findings == []

        again = V2OpenAIWriter("test-model", base_url=server.base_url, cache_dir=tmp_path / "cache", catalog=catalog)
        again.prefetch(keys)
        assert server.total_requests == len(keys)  # a rerun sends nothing
        assert again.writings(keys[:3]) == writer.writings(keys[:3])


def test_a_reply_no_file_can_hold_fails_that_writing_and_a_rerun_asks_again(tmp_path, monkeypatch):
    """A lone surrogate is valid JSON but no CSV or cache can store it: the writing fails with a
    message that says so (no traceback, nothing cached), and a rerun asks for it again."""
    import pytest

    from mrcr_gen.recipes.mrcr_v2._llm import WritingsFailed

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-v2")
    catalog = small_catalog()
    broken = {"on": True}

    def policy(messages, body):
        text = writer_policy(messages, body)
        return text + "\ud83d" if broken["on"] and "lighthouses" in messages[0]["content"] else text

    with ChatServer(policy) as server:
        writer = V2OpenAIWriter("test-model", base_url=server.base_url, cache_dir=tmp_path / "cache", catalog=catalog)
        keys = writer.catalog_keys()
        with pytest.raises(WritingsFailed, match="UTF-8 cannot store"):
            writer.prefetch(keys)
        first = server.total_requests
        broken["on"] = False
        again = V2OpenAIWriter("test-model", base_url=server.base_url, cache_dir=tmp_path / "cache", catalog=catalog)
        again.prefetch(keys)
        resent = server.total_requests - first
    assert first == len(keys) and 0 < resent < len(keys)
    assert all(w.text.encode("utf-8") for w in again.writings(keys))


def test_batch_writer_through_the_batch_api_collects_and_resends(tmp_path, monkeypatch):
    """Issue 37: MRCR v2's writings through the test server's Batch API: nothing online, each
    writing one batch line; --no-wait raises WritingsPending and a rerun collects without sending again;
    an expired batch is resent once; the writings are cached as online ones (a rerun sends nothing)."""
    import pytest

    from mrcr_gen.batch import BatchLimits
    from mrcr_gen.recipes.mrcr_v2._llm import WritingsFailed, WritingsPending
    from tests.support.chat_server import BatchBehaviour

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-v2")
    catalog = small_catalog()
    fast = BatchLimits(poll_first_s=0.01, poll_cap_s=0.05)

    def writer(server, **options):
        return V2OpenAIWriter(
            "test-model", base_url=server.base_url, cache_dir=tmp_path / "cache", catalog=catalog, batch=True,
            limits=fast, **options,
        )  # fmt: skip

    with ChatServer(writer_policy, batches=BatchBehaviour(hold=True)) as server:
        keys = writer(server).catalog_keys()
        with pytest.raises(WritingsPending, match=f"{len(keys)} writings are in batches still running"):
            writer(server, wait=False).prefetch(keys)
        server.release_batches()
        first = writer(server)
        first.prefetch(keys)
        assert server.total_requests == 0 and server.stats()["batch_requests"] == len(keys)
        assert server.stats()["batches_created"] == 1 and first.requests_sent == 0  # collected, not sent again
        asks = {body["messages"][0]["content"].split("\n\n")[0] for body in server.batch_requests}
        assert asks == {key.ask for key, _ in keys}
        online = V2OpenAIWriter("test-model", base_url=server.base_url, cache_dir=tmp_path / "cache", catalog=catalog)
        online.prefetch(keys)
        assert server.total_requests == 0 and online.writings(keys[:3]) == first.writings(keys[:3])

    with ChatServer(writer_policy, batches=BatchBehaviour(expire_after=5)) as server:
        other = V2OpenAIWriter(
            "test-model", base_url=server.base_url, cache_dir=tmp_path / "c2", catalog=catalog, batch=True,
            limits=fast, temperature=0.5,
        )  # fmt: skip
        with pytest.raises(WritingsFailed, match=f"{len(keys) - 5} writings failed .*batch_expired"):
            other.prefetch(keys)
        server.batch_behaviour = BatchBehaviour()
        again = V2OpenAIWriter(
            "test-model", base_url=server.base_url, cache_dir=tmp_path / "c2", catalog=catalog, batch=True,
            limits=fast, temperature=0.5,
        )  # fmt: skip
        again.prefetch(keys)
        assert server.stats()["batch_requests"] == 2 * len(keys) - 5  # the expired ones resent once


def test_batch_options_of_the_command(tmp_path, monkeypatch, capsys):
    """`mrcr-gen --recipe mrcr-v2 --writer openai --batch --no-wait`: exit 1 while the batches run,
    nothing written; options it cannot honour are refused with one line (exit 2)."""
    import pytest

    from mrcr_gen.cli import gen_main
    from tests.support.chat_server import BatchBehaviour

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-v2")

    def run(*args):
        with pytest.raises(SystemExit) as exit_info:
            gen_main(["--recipe", "mrcr-v2", "--bin", "8192", "--samples", "1", "--out", str(tmp_path / "d"), *args])
        return exit_info.value.code or 0, capsys.readouterr().err

    for args, message in [
        (["--no-wait"], "--no-wait goes with --batch"),
        (["--batch"], "--batch goes with --writer openai"),
        (["--writer", "openai", "--model", "m", "--batch", "--concurrency", "4"], "--concurrency has no meaning"),
    ]:
        code, err = run(*args)
        assert code == 2 and message in err and err.count("\n") == 1, err
    with ChatServer(writer_policy, batches=BatchBehaviour(hold=True)) as server:
        openai = ["--writer", "openai", "--model", "test-model", "--base-url", server.base_url]
        code, err = run(*openai, "--cache-dir", str(tmp_path / "cache"), "--batch", "--no-wait")
        assert code == 1 and "writings are in batches still running" in err, err
        assert server.total_requests == 0 and server.stats()["batches_created"] == 1
    assert not (tmp_path / "d").exists() or not any((tmp_path / "d").rglob("*.csv"))
