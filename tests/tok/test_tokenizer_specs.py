"""`load_tokenizer` specs and generation binned by a tokenizer other than o200k."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys

import pytest
import tiktoken
from tokenizers import Tokenizer as RustTokenizer

import mrcr_gen._tokens as tokens
from mrcr_gen import bin_for_tokens, count_tokens, iter_rows
from mrcr_gen._card import card_tokenizer
from mrcr_gen._tokens import TokenizerError, count_tokens_batch, load_tokenizer, row_token_count

TEXT = "write a poem about tapirs\n\n  Héllo wörld 你好 🎉 <|endoftext|> <s> 12345"


def test_default_is_o200k_and_unchanged():
    assert load_tokenizer().spec == "o200k_base"
    assert count_tokens(TEXT) == len(tokens.o200k().encode_ordinary(TEXT)) == count_tokens(TEXT, "o200k_base")
    assert load_tokenizer("o200k_base").describe()["sha256"] == tokens.O200K_SHA256


def test_hf_file_and_folder_count_as_the_tokenizers_library(tiny_dir, tiny_spec):
    reference = RustTokenizer.from_file(str(tiny_dir / "tokenizer.json"))
    expected = len(reference.encode(TEXT, add_special_tokens=False).ids)
    assert expected != count_tokens(TEXT)  # a different tokenizer really counts
    for spec in (tiny_spec, f"hf:{tiny_dir / 'tokenizer.json'}"):
        assert count_tokens(TEXT, spec) == expected
        assert count_tokens_batch([TEXT, TEXT + TEXT, ""], tokenizer=spec) == [
            len(reference.encode(t, add_special_tokens=False).ids) for t in (TEXT, TEXT + TEXT, "")
        ]
    messages = [{"role": "user", "content": TEXT}, {"role": "assistant", "content": "ok"}]
    assert row_token_count(messages, "abc", tiny_spec) == sum(
        len(reference.encode(t, add_special_tokens=False).ids) for t in (TEXT, "ok", "abc")
    )


def test_loaded_once_per_process_and_pickled_as_its_spec(tiny_spec):
    first = load_tokenizer(tiny_spec)
    assert load_tokenizer(tiny_spec) is first
    assert pickle.loads(pickle.dumps(first)) is first
    assert len(pickle.dumps(first)) < 200  # workers receive the spec, not the vocabulary


@pytest.mark.parametrize(
    "spec, message",
    [
        ("o300k", "unknown tokenizer 'o300k'"),
        ("hf:./no/such/tokenizer.json", "no such file or folder"),
    ],
)
def test_bad_specs_are_one_line_errors(spec, message):
    with pytest.raises(TokenizerError, match=message) as info:
        load_tokenizer(spec)
    assert "\n" not in str(info.value)


def test_folder_without_tokenizer_json(tmp_path):
    with pytest.raises(TokenizerError, match="holds no tokenizer.json"):
        load_tokenizer(f"hf:{tmp_path}")


def test_uncached_tiktoken_encoding_offline_is_one_line(monkeypatch):
    def offline(name):
        raise ConnectionError("no network")

    monkeypatch.setattr(tiktoken, "get_encoding", offline)
    tokens._load.cache_clear()
    try:
        with pytest.raises(TokenizerError, match="cl100k_base.*not in tiktoken's cache.*TIKTOKEN_CACHE_DIR"):
            load_tokenizer("cl100k_base")
    finally:
        tokens._load.cache_clear()


def test_generation_bins_every_row_by_the_tokenizer(tiny_data, tiny_spec):
    reference = load_tokenizer(tiny_spec)
    seen = 0
    for sidecar in sorted(tiny_data.rglob("*.samples.jsonl")):
        records = [json.loads(line) for line in sidecar.read_text().splitlines()]
        rows = list(iter_rows(sidecar.with_name(sidecar.name.replace(".samples.jsonl", ".parquet"))))
        assert len(records) == len(rows) == 3
        for record, row in zip(records, rows):
            exact = row_token_count(json.loads(row.prompt), row.answer, reference)
            assert record["n_tokens"] == exact  # exact, as with o200k
            assert record["tokenizer"] == tiny_spec
            assert record["bin"] == "(8192, 16384]" == bin_for_tokens(exact).label
            o200k_bin = bin_for_tokens(row_token_count(json.loads(row.prompt), row.answer))
            assert o200k_bin is None or o200k_bin.label != record["bin"]
            seen += 1
    assert seen == 6


def test_card_names_the_tokenizer(tiny_data, tiny_spec):
    card = (tiny_data / "README.md").read_text()
    assert card_tokenizer(card) == tiny_spec
    assert f"| tokenizer | {tiny_spec} (tokenizers), sha256 `{load_tokenizer(tiny_spec).describe()['sha256']}`" in card
    assert card_tokenizer("# no header\n") is None


def test_cli_generates_with_a_tokenizer_and_rejects_a_bad_one(tmp_path, tiny_spec):
    code = "from mrcr_gen.cli import gen_main; gen_main()"
    out = tmp_path / "out"
    args = ["--needles", "2", "--bin", "16384", "--samples", "1", "--out", str(out)]
    done = subprocess.run([sys.executable, "-c", code, *args, "--tokenizer", tiny_spec], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    record = json.loads((out / "2needle" / "2needle_0.samples.jsonl").read_text())
    assert record["tokenizer"] == tiny_spec and record["bin"] == "(8192, 16384]"
    bad = subprocess.run([sys.executable, "-c", code, *args, "--tokenizer", "hf:nope/"], capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2
    assert bad.stderr.strip().startswith("mrcr-gen: error: --tokenizer: hf:nope/") and len(bad.stderr.strip().splitlines()) == 1


def test_the_offline_cli_does_not_import_hf_libraries():
    probe = "import sys, mrcr_gen.cli, mrcr_gen; print(sorted(m for m in ('tokenizers', 'huggingface_hub', 'jinja2', 'datasets') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr
