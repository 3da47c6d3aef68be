"""Exact o200k_base token counting that also works with no network.

tiktoken's own loader (its cache, then the network) is tried first. When that fails, the
vocabulary shipped by the `bpe-openai` package is used after its sha256 is checked, and is
put into tiktoken's cache so that later loads take tiktoken's ordinary path.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import importlib.util
import os
import tempfile
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path

import tiktoken

from ._models import Message

O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"


class TokenizerUnavailable(RuntimeError):
    """o200k_base could be loaded neither by tiktoken nor from the bpe-openai package."""


def _packaged_vocabulary() -> bytes:
    # Located without importing bpe_openai, whose import builds its own tokenizers (~1 s).
    spec = importlib.util.find_spec("bpe_openai")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    packed_files = [Path(folder) / "data" / "o200k_base.tiktoken.gz" for folder in locations]
    packed_file = next((path for path in packed_files if path.is_file()), None)
    if packed_file is None:
        raise TokenizerUnavailable(
            "o200k_base is not in tiktoken's cache, the network is unreachable and the "
            "bpe-openai package (which ships the vocabulary) is not installed"
        )
    data = gzip.decompress(packed_file.read_bytes())
    digest = hashlib.sha256(data).hexdigest()
    if digest != O200K_SHA256:
        raise TokenizerUnavailable(f"bpe-openai's o200k_base has sha256 {digest}, expected {O200K_SHA256}")
    return data


def _seed_tiktoken_cache(data: bytes) -> None:
    """Best effort: store the verified file where tiktoken's own loader looks first."""
    cache_dir = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR")
    if cache_dir is None:
        cache_dir = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    if cache_dir == "":
        return
    try:
        os.makedirs(cache_dir, exist_ok=True)
        path = os.path.join(cache_dir, hashlib.sha1(O200K_URL.encode()).hexdigest())
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except OSError:
        pass


def _encoding_from_vocabulary(data: bytes) -> tiktoken.Encoding:
    import tiktoken_ext.openai_public as openai_public

    ranks = {base64.b64decode(token): int(rank) for token, rank in (line.split() for line in data.splitlines() if line)}
    # Reuse tiktoken's own definition (pattern, special tokens) so it can never drift from it.
    original = openai_public.load_tiktoken_bpe
    openai_public.load_tiktoken_bpe = lambda *args, **kwargs: ranks
    try:
        spec = openai_public.o200k_base()
    finally:
        openai_public.load_tiktoken_bpe = original
    return tiktoken.Encoding(**spec)


@lru_cache(maxsize=1)
def o200k() -> tiktoken.Encoding:
    """The o200k_base encoding: tiktoken's cache or network first, then the packaged file."""
    try:
        return tiktoken.get_encoding("o200k_base")
    except Exception:  # tiktoken raises requests/urllib/blobfile errors of many kinds offline
        data = _packaged_vocabulary()
        _seed_tiktoken_cache(data)
        return _encoding_from_vocabulary(data)


def count_tokens(text: str) -> int:
    """o200k tokens of one text, special-token strings counted as plain text."""
    return len(o200k().encode_ordinary(text))


def count_tokens_batch(texts: Sequence[str], num_threads: int = 2) -> list[int]:
    """Token counts of many texts, tokenized in parallel threads by tiktoken."""
    if not texts:
        return []
    return [len(tokens) for tokens in o200k().encode_ordinary_batch(list(texts), num_threads=num_threads)]


def row_token_count(messages: Iterable[Message | dict], answer: str) -> int:
    """o200k tokens of a row as openai/mrcr bins it: each message content, summed, plus the answer."""
    contents = [m.content if isinstance(m, Message) else m["content"] for m in messages]
    return sum(count_tokens_batch([*contents, answer]))
