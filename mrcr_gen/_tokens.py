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
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
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


_PROBE = "MRCR probe <|endoftext|> <|endofprompt|> héllo wörld 你好 🎉\n\n   tabs\t and 12345 numbers "


@lru_cache(maxsize=1)
def token_counter() -> Callable[[str], int]:
    """A function giving exactly `len(o200k().encode_ordinary(text))`, as fast as tiktoken allows.

    tiktoken's buffer encoder gives the same tokens without building a Python list of ints
    (about a quarter faster on long texts). It is private API, so it is used only when it agrees
    with `encode_ordinary` on a probe; otherwise `encode_ordinary` is.
    """
    encoding = o200k()
    buffer_encode = getattr(getattr(encoding, "_core_bpe", None), "encode_to_tiktoken_buffer", None)
    no_special: frozenset[str] = frozenset()

    def ordinary(text: str) -> int:
        return len(encoding.encode_ordinary(text))

    if buffer_encode is None:
        return ordinary

    def buffered(text: str) -> int:
        view = memoryview(buffer_encode(text, no_special))
        return view.nbytes // view.itemsize

    try:
        if all(buffered(t) == ordinary(t) for t in (_PROBE, _PROBE * 50, "")):
            return buffered
    except Exception:  # a tiktoken without that private API shape
        pass
    return ordinary


def count_tokens(text: str) -> int:
    """o200k tokens of one text, special-token strings counted as plain text."""
    return token_counter()(text)


class RepeatedTextCounter:
    """Exact token counts that remember texts seen before, by a 128-bit digest of their content.

    MRCR files reuse writings across rows (each ask has a few writings), so a file's recount
    mostly meets texts it has counted already; hashing a text costs a few percent of tokenizing it.
    """

    def __init__(self, max_entries: int = 1 << 20, min_chars: int = 256) -> None:
        self._counts: dict[bytes, int] = {}
        self._max_entries = max_entries
        self._min_chars = min_chars

    def __call__(self, text: str) -> int:
        if len(text) < self._min_chars:
            return token_counter()(text)
        key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        count = self._counts.get(key)
        if count is None:
            if len(self._counts) >= self._max_entries:
                self._counts.clear()
            count = self._counts[key] = token_counter()(text)
        return count


@lru_cache(maxsize=1)
def tokenizer_threads() -> ThreadPoolExecutor:
    """Threads for tokenizing: tiktoken releases the GIL, so they run on every core."""
    return ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 1), thread_name_prefix="mrcr-tokens")


def count_tokens_batch(texts: Sequence[str], num_threads: int = 2) -> list[int]:
    """Token counts of many texts; tiktoken releases the GIL, so `num_threads` > 1 runs in parallel."""
    counter = token_counter()
    if num_threads <= 1 or len(texts) < 2:
        return [counter(text) for text in texts]
    chunk = -(-len(texts) // num_threads)
    parts = [texts[i : i + chunk] for i in range(0, len(texts), chunk)]
    return [n for part in tokenizer_threads().map(lambda part: [counter(t) for t in part], parts) for n in part]


def row_token_count(messages: Iterable[Message | dict], answer: str) -> int:
    """o200k tokens of a row as openai/mrcr bins it: each message content, summed, plus the answer."""
    contents = [m.content if isinstance(m, Message) else m["content"] for m in messages]
    return sum(count_tokens_batch([*contents, answer]))
