"""Issue 34 item 12: cached tokens through Inspect logs, both directions. Inspect's `input_tokens`
excludes `input_tokens_cache_read`; ours (OpenAI's) `prompt_tokens` includes the cached tokens."""

from __future__ import annotations

import pytest

from mrcr_gen import EvalConfig, run_eval
from mrcr_gen._api import summarize_run
from tests.support.chat_server import ChatServer

API_KEY = "sk-test-inspect"


def test_exported_usage_follows_inspects_convention_and_reads_back_exactly(mrcr_data, tmp_path, monkeypatch):
    from inspect_ai.log import read_eval_log

    from mrcr_gen.cli import eval_main
    from mrcr_gen.eval._results import read_results
    from mrcr_gen.inspect._import import summarize_inspect_log

    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    files = [str(p) for p in sorted(mrcr_data.glob("a_*.parquet"))]
    with ChatServer("first_needle", cached_share=0.6) as server:
        run_eval(EvalConfig(data=files, model="test-model", out=str(tmp_path / "run"), base_url=server.base_url))
    records = {r["digest"]: r for r in read_results(tmp_path / "run" / "results.jsonl") if r["status"] == "ok"}
    assert records and all(r["usage"]["cached_tokens"] > 0 for r in records.values())
    out = tmp_path / "run.eval"
    with pytest.raises(SystemExit) as info:
        eval_main(["export-inspect", str(tmp_path / "run"), "-o", str(out)])
    assert info.value.code == 0
    for sample in read_eval_log(str(out)).samples or []:
        record = sample.metadata["mrcr_record"]
        if record["status"] != "ok":
            continue
        usage, ours = sample.output.usage, record["usage"]
        assert usage.input_tokens_cache_read == ours["cached_tokens"]
        assert usage.input_tokens == ours["prompt_tokens"] - ours["cached_tokens"]  # Inspect's convention
    assert summarize_inspect_log(out)["usage"] == summarize_run(tmp_path / "run")["usage"]
