import hashlib
import json
import os
import subprocess
import sys

import pytest

import mrcr_gen._tokens as tokens
from mrcr_gen import count_tokens, count_tokens_batch, row_token_count


def test_known_counts():
    assert count_tokens("") == 0
    assert count_tokens("hello world") == 2
    # Special-token text is counted as plain text, never rejected.
    assert count_tokens("<|endoftext|>") > 1
    texts = ["write a poem about tapirs", "Prepend aYooSG8CQg to the 2nd (1 indexed) poem about tapirs."]
    assert count_tokens_batch(texts) == [count_tokens(t) for t in texts]
    assert row_token_count([{"role": "user", "content": texts[0]}], texts[1]) == sum(count_tokens_batch(texts))


def test_packaged_vocabulary_is_the_genuine_file():
    data = tokens._packaged_vocabulary()
    assert hashlib.sha256(data).hexdigest() == tokens.O200K_SHA256
    encoding = tokens._encoding_from_vocabulary(data)
    sample = "MRCR hides 2, 4 or 8 identical asks — “needles” — in a long chat.\n\n  Done!"
    assert encoding.encode_ordinary(sample) == tokens.o200k().encode_ordinary(sample)
    assert encoding.n_vocab == tokens.o200k().n_vocab


def test_a_tampered_vocabulary_is_refused(monkeypatch):
    monkeypatch.setattr(tokens, "O200K_SHA256", "0" * 64)
    with pytest.raises(tokens.TokenizerUnavailable, match="sha256"):
        tokens._packaged_vocabulary()


def test_loads_with_an_empty_tiktoken_cache_and_seeds_it(tmp_path):
    """Offline (as here), tiktoken's own loader fails; the packaged file is used and cached."""
    env = dict(os.environ, TIKTOKEN_CACHE_DIR=str(tmp_path))
    probe = "import json, mrcr_gen; print(json.dumps([mrcr_gen.count_tokens('hello world'), mrcr_gen.o200k().name]))"
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == [2, "o200k_base"]
    cached = tmp_path / hashlib.sha1(tokens.O200K_URL.encode()).hexdigest()
    assert hashlib.sha256(cached.read_bytes()).hexdigest() == tokens.O200K_SHA256


def test_repeated_text_counter_is_exact_and_bounded():
    from mrcr_gen._tokens import RepeatedTextCounter

    counter = RepeatedTextCounter(max_entries=3, min_chars=10)
    texts = ["short", "a long writing about tapirs " * 20, "another long one, with ünïcode 🎉 " * 30]
    texts += [f"variant {i} of a long writing " * 10 for i in range(5)]
    for _ in range(3):
        assert [counter(t) for t in texts] == [count_tokens(t) for t in texts]
    assert len(counter._counts) <= 3


def test_o200k_is_built_on_its_first_count_when_tiktokens_cache_holds_it(tmp_path):
    """A process that only names the tokenizer (a validator whose workers count) never builds it."""
    env = dict(os.environ, TIKTOKEN_CACHE_DIR=str(tmp_path))
    seed = "import mrcr_gen; mrcr_gen.count_tokens('x')"  # fills the empty cache from the packaged file
    subprocess.run([sys.executable, "-c", seed], env=env, check=True)
    probe = (
        "import json; from mrcr_gen._tokens import load_tokenizer, o200k; tok = load_tokenizer('o200k_base');"
        "built = o200k.cache_info().currsize; n = tok.count('hello world');"
        "print(json.dumps([bool(built), bool(o200k.cache_info().currsize), n, tok.describe()['sha256']]))"
    )
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == [False, True, 2, tokens.O200K_SHA256]


def test_the_vocabulary_parses_as_tiktoken_parses_it():
    """`_encoding_from_vocabulary` reads the file in bulk (ranks in order): the ranks tiktoken's
    loader reads, line by line."""
    import base64

    data = tokens._packaged_vocabulary()
    lines = (line.split() for line in data.splitlines() if line)
    assert tokens._encoding_from_vocabulary(data)._mergeable_ranks == {
        base64.b64decode(token): int(rank) for token, rank in lines
    }


def test_tiktokens_cache_is_read_only_when_it_holds_the_genuine_file(tmp_path, monkeypatch):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    assert tokens._cached_vocabulary() is None  # nothing cached
    cached = tmp_path / hashlib.sha1(tokens.O200K_URL.encode()).hexdigest()
    genuine = tokens._packaged_vocabulary()
    cached.write_bytes(genuine[:-10] + b"0000000000")  # tampered: left to tiktoken's loader
    assert tokens._cached_vocabulary() is None
    cached.write_bytes(genuine)
    assert tokens._cached_vocabulary() == genuine
