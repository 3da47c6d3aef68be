"""Exact token counting with the tokenizer a spec string names (o200k_base by default).

Specs: a tiktoken encoding name (`o200k_base`, the benchmark's own, `cl100k_base`, ...),
`hf:PATH` (a local tokenizer.json, or a folder holding one) or `hf:ORG/NAME[@REVISION]` (a Hub
model's tokenizer.json, fetched once through huggingface_hub's cache). Workers receive the spec
string and `load_tokenizer` loads it once per process.

o200k_base works with no network: tiktoken's own loader (its cache, then the network) is tried
first; when that fails, the vocabulary shipped by the `bpe-openai` package is used after its
sha256 is checked, and is put into tiktoken's cache so that later loads take tiktoken's
ordinary path.
"""

from __future__ import annotations

import binascii
import contextlib
import gzip
import hashlib
import importlib.util
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import cached_property, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # tiktoken is imported where it is used: importing this module stays cheap
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


def _tiktoken_cache_file() -> str | None:
    """Where tiktoken's own loader looks for o200k_base first (None: its cache is turned off)."""
    cache_dir = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR")
    if cache_dir is None:
        cache_dir = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    if cache_dir == "":
        return None
    return os.path.join(cache_dir, hashlib.sha1(O200K_URL.encode()).hexdigest())


def _seed_tiktoken_cache(data: bytes) -> None:
    """Best effort: store the verified file where tiktoken's own loader looks first."""
    path = _tiktoken_cache_file()
    if path is None:
        return
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except OSError:
        pass


#: Bytes of o200k_base's file parsed at a time.
VOCABULARY_BLOCK = 1 << 16


def _encoding_from_vocabulary(data: bytes) -> tiktoken.Encoding:
    import tiktoken
    import tiktoken_ext.openai_public as openai_public

    # Lines "<base64 token> <rank>", the ranks 0, 1, 2, ... in order (the file is checked by its sha256):
    # parsed in bulk, about twice as fast as tiktoken's loop (0.05 s of CPU at every command's first
    # count), a block of lines at a time (the whole file's fields at once took 20 MB more memory).
    ranks: dict[bytes, int] = {}
    start = 0
    while start < len(data):
        end = data.find(b"\n", start + VOCABULARY_BLOCK)
        end = len(data) if end < 0 else end + 1
        tokens = data[start:end].split()[0::2]
        ranks.update(zip(map(binascii.a2b_base64, tokens), range(len(ranks), len(ranks) + len(tokens)), strict=True))
        start = end
    # Reuse tiktoken's own definition (pattern, special tokens) so it can never drift from it.
    original = openai_public.load_tiktoken_bpe
    openai_public.load_tiktoken_bpe = lambda *args, **kwargs: ranks
    try:
        spec = openai_public.o200k_base()
    finally:
        openai_public.load_tiktoken_bpe = original
    return tiktoken.Encoding(**spec)


def _cached_vocabulary() -> bytes | None:
    """The o200k_base file in tiktoken's cache when it holds the expected bytes, else None."""
    path = _tiktoken_cache_file()
    try:
        data = Path(path).read_bytes() if path is not None else None
    except OSError:
        return None
    return data if data is not None and hashlib.sha256(data).hexdigest() == O200K_SHA256 else None


@lru_cache(maxsize=1)
def o200k() -> tiktoken.Encoding:
    """The o200k_base encoding: from tiktoken's cache (read as tiktoken reads it, parsed faster),
    else tiktoken's own loader (its network), then the packaged file."""
    import tiktoken

    cached = _cached_vocabulary()
    if cached is not None:
        return _encoding_from_vocabulary(cached)
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


DEFAULT_TOKENIZER = "o200k_base"


class TokenizerError(ValueError):
    """A tokenizer spec that names nothing loadable; the message is one line saying why."""


class Tokenizer:
    """Counts tokens of texts the way one tokenizer does; pickles as its spec (cheap for workers)."""

    spec: str
    library: str

    def describe(self) -> dict:
        """What a dataset card, sidecar or report records about the tokenizer that counted."""
        return {"spec": self.spec, "library": self.library}

    def count(self, text: str) -> int:
        raise NotImplementedError

    def count_batch(self, texts: Sequence[str], num_threads: int = 2) -> list[int]:
        if num_threads <= 1 or len(texts) < 2:
            return [self.count(text) for text in texts]
        chunk = -(-len(texts) // num_threads)
        parts = [texts[i : i + chunk] for i in range(0, len(texts), chunk)]
        count = self.count
        return [n for part in tokenizer_threads().map(lambda part: [count(t) for t in part], parts) for n in part]

    def __reduce__(self):
        return load_tokenizer, (self.spec,)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec!r})"


class TiktokenTokenizer(Tokenizer):
    """A tiktoken encoding; special-token strings are counted as plain text (`encode_ordinary`)."""

    library = "tiktoken"

    def __init__(self, spec: str) -> None:
        self.spec = spec
        if spec == DEFAULT_TOKENIZER:
            cached = _tiktoken_cache_file()
            if cached is None or not os.path.isfile(cached):
                o200k()  # fails now, with its one-line reason, if it cannot load at all
            # Otherwise built on the first count: a process that only names the tokenizer (a
            # validator whose workers count) never holds its ~70 MB.
            return
        import tiktoken

        try:
            self.encoding = tiktoken.get_encoding(spec)
        except Exception as exc:  # tiktoken raises requests/urllib/blobfile errors of many kinds offline
            raise TokenizerError(
                f"tiktoken encoding {spec!r} is not in tiktoken's cache and could not be downloaded "
                f"({type(exc).__name__}); only o200k_base works offline out of the box: set TIKTOKEN_CACHE_DIR "
                "to a cache holding it, or use an hf: tokenizer"
            ) from None
        encode = self.encoding.encode_ordinary
        self._count = lambda text: len(encode(text))

    def describe(self) -> dict:
        described = super().describe()
        if self.spec == DEFAULT_TOKENIZER:
            described["sha256"] = O200K_SHA256
        return described

    def count(self, text: str) -> int:
        return self._count(text)

    # o200k's, built when first used (see __init__); other encodings set both in __init__.
    @cached_property
    def encoding(self) -> tiktoken.Encoding:
        return o200k()

    @cached_property
    def _count(self) -> Callable[[str], int]:
        return token_counter()  # the buffer encoder: the fast path stays as fast


class HFTokenizer(Tokenizer):
    """A Hugging Face `tokenizer.json`, loaded with the `tokenizers` library.

    Texts are counted without the special tokens a model adds around a whole prompt (BOS, ...):
    a row's count is the sum over its message contents, as for tiktoken.
    """

    library = "tokenizers"

    def __init__(self, spec: str, file: Path, revision: str | None = None) -> None:
        try:
            from tokenizers import Tokenizer as RustTokenizer
        except ImportError:
            raise TokenizerError("hf: tokenizers need the `tokenizers` package: pip install 'mrcr-gen[hf]'") from None
        self.spec = spec
        self.file = file
        self.revision = revision
        data = file.read_bytes()
        self.sha256 = hashlib.sha256(data).hexdigest()
        try:
            self.tokenizer = RustTokenizer.from_str(data.decode("utf-8"))
        except Exception as exc:
            raise TokenizerError(
                f"{file} is not a tokenizer.json the tokenizers library reads: {str(exc).splitlines()[0]}"
            ) from None

    def describe(self) -> dict:
        described = super().describe() | {"sha256": self.sha256}
        if self.revision is not None:
            described["revision"] = self.revision
        return described

    def count(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def count_batch(self, texts: Sequence[str], num_threads: int = 2) -> list[int]:
        if len(texts) < 2:
            return [self.count(text) for text in texts]
        # encode_batch runs on the Rust side's own thread pool.
        return [len(e.ids) for e in self.tokenizer.encode_batch(list(texts), add_special_tokens=False)]

    def config(self) -> dict:
        """tokenizer_config.json beside tokenizer.json (chat template, special tokens), or {}."""
        path = self.file.with_name("tokenizer_config.json")
        if not path.is_file():
            return {}
        return json.loads(path.read_text(encoding="utf-8"))


_HUB_REPO = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+(@[^@]+)?$")


def _hf_tokenizer(spec: str) -> HFTokenizer:
    target = spec.removeprefix("hf:")
    path = Path(target).expanduser()
    if path.is_dir():
        file = path / "tokenizer.json"
        if not file.is_file():
            raise TokenizerError(f"{spec}: folder {path} holds no tokenizer.json")
        return HFTokenizer(spec, file)
    if path.is_file():
        return HFTokenizer(spec, path)
    if not _HUB_REPO.match(target) or target.startswith((".", "/", "~")):
        raise TokenizerError(f"{spec}: no such file or folder, and not a Hub model name ORG/NAME[@REVISION]")
    repo_id, _, revision = target.partition("@")
    file, commit = hub_model_file(repo_id, "tokenizer.json", revision or None)
    with contextlib.suppress(TokenizerError):  # for --chat-template; optional
        hub_model_file(repo_id, "tokenizer_config.json", commit)
    return HFTokenizer(spec, file, commit)


def hub_model_file(repo_id: str, filename: str, revision: str | None) -> tuple[Path, str]:
    """A file of a Hub model repo through huggingface_hub's cache (offline once cached), and its commit."""
    try:
        from huggingface_hub import hf_hub_download
    except ImportError:
        raise TokenizerError("hf:ORG/NAME tokenizers need huggingface_hub: pip install 'mrcr-gen[hf]'") from None
    try:
        local = Path(hf_hub_download(repo_id, filename, revision=revision))
    except Exception as exc:  # offline and not cached, no such repo or file, gated, ...
        first = str(exc).strip().splitlines()
        raise TokenizerError(
            f"hf:{repo_id}: cannot get {filename} from the Hub or its cache: "
            f"{type(exc).__name__}: {first[0] if first else ''}"
        ) from None
    return local, local.parent.name


@lru_cache(maxsize=16)
def _load(spec: str) -> Tokenizer:
    import tiktoken

    if spec.startswith("hf:"):
        return _hf_tokenizer(spec)
    if spec in tiktoken.list_encoding_names():
        return TiktokenTokenizer(spec)
    raise TokenizerError(
        f"unknown tokenizer {spec!r}: give a tiktoken encoding ({', '.join(tiktoken.list_encoding_names())}), "
        "hf:PATH (a tokenizer.json or a folder holding one) or hf:ORG/NAME"
    )


def load_tokenizer(spec: str | Tokenizer = DEFAULT_TOKENIZER) -> Tokenizer:
    """The tokenizer a spec names, loaded once per process; a TokenizerError (one line) otherwise."""
    if isinstance(spec, Tokenizer):
        return spec
    return _load(spec.strip())


TokenizerSpec = str | Tokenizer


def count_tokens(text: str, tokenizer: TokenizerSpec = DEFAULT_TOKENIZER) -> int:
    """Tokens of one text (o200k by default), special-token strings counted as plain text."""
    if tokenizer == DEFAULT_TOKENIZER:
        return token_counter()(text)
    return load_tokenizer(tokenizer).count(text)


class RepeatedTextCounter:
    """Exact token counts that remember texts seen before, by a 128-bit digest of their content.

    MRCR files reuse writings across rows (each ask has a few writings), so a file's recount
    mostly meets texts it has counted already; hashing a text costs a few percent of tokenizing it.
    """

    def __init__(
        self, max_entries: int = 1 << 16, min_chars: int = 256, tokenizer: TokenizerSpec = DEFAULT_TOKENIZER
    ) -> None:
        self._counts: dict[bytes, int] = {}
        self._max_entries = max_entries
        self._min_chars = min_chars
        self._count = token_counter() if tokenizer == DEFAULT_TOKENIZER else load_tokenizer(tokenizer).count

    def __call__(self, text: str) -> int:
        if len(text) < self._min_chars:
            return self._count(text)
        key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        count = self._counts.get(key)
        if count is None:
            if len(self._counts) >= self._max_entries:
                self._counts.clear()
            count = self._counts[key] = self._count(text)
        return count


@lru_cache(maxsize=1)
def tokenizer_threads() -> ThreadPoolExecutor:
    """This process's threads for tokenizing: tiktoken releases the GIL, so they run on every core."""
    return ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 1), thread_name_prefix="mrcr-tokens")


# A forked child has none of its parent's threads: it starts its own pool when it needs one.
os.register_at_fork(after_in_child=tokenizer_threads.cache_clear)


def count_tokens_batch(
    texts: Sequence[str], num_threads: int = 2, tokenizer: TokenizerSpec = DEFAULT_TOKENIZER
) -> list[int]:
    """Token counts of many texts; tiktoken releases the GIL, so `num_threads` > 1 runs in parallel."""
    return load_tokenizer(tokenizer).count_batch(texts, num_threads)


def row_token_count(
    messages: Iterable[Message | dict], answer: str, tokenizer: TokenizerSpec = DEFAULT_TOKENIZER
) -> int:
    """Tokens of a row as openai/mrcr bins it: each message content, summed, plus the answer."""
    from ._models import Message

    contents = [m.content if isinstance(m, Message) else m["content"] for m in messages]
    return sum(count_tokens_batch([*contents, answer], tokenizer=tokenizer))
