"""mrcr-eval --max-context-window counted as the server counts: a tokenizer, the chat template,
or the server's /tokenize; rows that do not fit are listed before any request is sent."""

from __future__ import annotations

import json

import pytest
from tokenizers import Tokenizer as RustTokenizer

from mrcr_gen import iter_rows
from mrcr_gen._tokens import TokenizerError
from mrcr_gen.cli._eval import eval_main
from mrcr_gen.eval._fit import chat_template_counter, contents_counter, rows_over_window, server_counter
from mrcr_gen.recipes import RECIPES
from tests.support.chat_server import ChatServer, word_tokens

API_KEY = "sk-test-fit-0123456789"


def rows_of(data):
    return [json.loads(r.prompt) for r in iter_rows(data)]


def call(capsys, *args):
    with pytest.raises(SystemExit) as info:
        eval_main([*map(str, args)])
    captured = capsys.readouterr()
    return info.value.code, captured.out, captured.err


def rendered_by_hand(messages) -> str:
    """What the tiny tokenizer's template renders, written out without jinja2."""
    body = "".join(f"<|{m['role']}|>\n{m['content'].strip()}</s>\n" for m in messages)
    return "<s>" + body + "<|assistant|>\n"


def test_chat_template_counts_the_rendered_prompt_exactly(tiny_dir, tiny_spec, tiny_data):
    reference = RustTokenizer.from_file(str(tiny_dir / "tokenizer.json"))
    count = chat_template_counter(tiny_spec)
    for messages in rows_of(next(tiny_data.rglob("*.parquet"))):
        expected = len(reference.encode(rendered_by_hand(messages), add_special_tokens=False).ids)
        assert count(messages) == expected
        assert count(messages) > contents_counter(tiny_spec)(messages)  # role markers and BOS/EOS count too


def test_chat_template_needs_an_hf_tokenizer_with_a_template(tmp_path, tiny_dir):
    with pytest.raises(TokenizerError, match="needs an hf: tokenizer"):
        chat_template_counter("o200k_base")
    (tmp_path / "tokenizer.json").write_bytes((tiny_dir / "tokenizer.json").read_bytes())
    with pytest.raises(TokenizerError, match="no chat_template"):
        chat_template_counter(f"hf:{tmp_path}")


def test_rows_over_window_lists_exactly_the_rows_above(tiny_spec, tiny_data):
    files = sorted(str(p) for p in tiny_data.rglob("*.parquet"))
    count = chat_template_counter(tiny_spec)
    counts = [count(m) for f in files for m in rows_of(f)]
    window = sorted(counts)[len(counts) // 2]
    over = rows_over_window(files, window, count, recipes=RECIPES)
    assert sorted(t.prompt_tokens for t in over) == sorted(c for c in counts if c > window)
    assert len(over) >= 1 and all(t.prompt_tokens > window for t in over)


def test_tokenize_endpoint_counts_via_the_local_server(tiny_data):
    data = next(tiny_data.rglob("*.parquet"))
    with ChatServer("oracle") as server:
        count = server_counter(server.base_url, "test-model")
        for messages in rows_of(data):
            assert count(messages) == len(word_tokens({"messages": messages}))
        assert server.tokenize_requests == 3 and server.total_requests == 0
    with pytest.raises(TokenizerError, match="cannot reach"):
        server_counter(server.base_url, "m", timeout=2)([{"role": "user", "content": "x"}])


@pytest.mark.parametrize("mode", ["tokenizer", "chat-template", "server"])
def test_eval_skips_and_lists_rows_that_do_not_fit_before_sending(mode, tiny_spec, tiny_data, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    data = next(tiny_data.rglob("2needle_0.parquet"))
    prompts = rows_of(data)
    if mode == "server":
        counts = [len(word_tokens({"messages": m})) for m in prompts]
        extra = ["--count-with-server"]
    elif mode == "tokenizer":
        counts = [contents_counter(tiny_spec)(m) for m in prompts]
        extra = ["--tokenizer", tiny_spec]
    else:
        counts = [chat_template_counter(tiny_spec)(m) for m in prompts]
        extra = ["--tokenizer", tiny_spec, "--chat-template"]
    window = sorted(counts)[1]  # the largest row does not fit
    too_long = [i for i, c in enumerate(counts) if c > window]
    assert len(too_long) == 1
    out = tmp_path / "run"
    with ChatServer("oracle") as server:
        code, _, err = call(capsys, data, "--model", "test-model", "--base-url", server.base_url, "--out", out,
                            "--max-context-window", window, "--concurrency", "1", *extra)
        sent = [m["messages"] for m in server.requests]
    assert code == 0, err
    assert f"1 row(s) over --max-context-window {window}" in err
    assert f"row {too_long[0]}: {counts[too_long[0]]} tokens" in err
    assert err.index("over --max-context-window") < err.index("this run:")
    assert len(sent) == 2 and prompts[too_long[0]] not in sent
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    skipped = [r for r in records if r["status"] == "skipped"]
    assert [(r["row"], r["context_tokens"]) for r in skipped] == [(too_long[0], counts[too_long[0]])]
    options = json.loads((out / "run.json").read_text())["options"]
    assert options["chat_template"] == (mode == "chat-template") and options["count_with_server"] == (mode == "server")
    assert options["tokenizer_spec"] == ("o200k_base" if mode == "server" else tiny_spec)


def test_count_with_server_needs_a_base_url(tiny_data, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    code, _, err = call(capsys, tiny_data, "--model", "m", "--out", tmp_path / "r", "--max-context-window", "10", "--count-with-server")
    assert code == 2 and "--count-with-server needs --base-url" in err


def test_a_template_that_raises_is_a_one_line_error(tmp_path, tiny_dir):
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (tmp_path / name).write_bytes((tiny_dir / name).read_bytes())
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    config["chat_template"] = "{% if messages[0]['role'] == 'user' %}{{ raise_exception('system first') }}{% endif %}"
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    count = chat_template_counter(f"hf:{tmp_path}")
    assert count([{"role": "system", "content": "x"}]) == 0
    with pytest.raises(TokenizerError, match="the chat template failed on a row: TemplateError: system first"):
        count([{"role": "user", "content": "x"}])
