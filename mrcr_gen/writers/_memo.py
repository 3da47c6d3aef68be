"""Writers that compose text on demand and tokenize each distinct writing exactly once."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from .._models import Ask, Writing
from .._tokens import DEFAULT_TOKENIZER, count_tokens_batch, load_tokenizer

# A real ask gets one of a few writings: 2 of 23 repeated asks got the identical one in real rows.
OFFLINE_VARIANTS_PER_ASK = 8
# Offline variants are unbounded (any needle count works); distractors use the first few only.
UNBOUNDED_VARIANTS = 1 << 30
#: The writings of the shared parts this process composed, by store and start: the writer that then
#: builds rows in this process takes them from here, not from the part files (one store at a time).
_COMPOSED: dict[Path, dict[int, list[Writing]]] = {}


class MemoizedWriter:
    """Base for writers whose text is a pure function of (ask, variant).

    Large jobs draw nearly every distractor writing in every worker; instead of each worker
    composing them all, they can be composed once, spread over the workers (`shared_keys`,
    `compose_part`), and read back by every worker from the parts (`attach`), but for the parts
    its own process composed, which it takes as they are.
    """

    name = "memoized"

    def __init__(self, tokenizer: str = DEFAULT_TOKENIZER) -> None:
        self._cache: dict[tuple[Ask, int], Writing] = {}
        self._texts: dict[tuple[Ask, int], str] = {}  # composed by `texts`, not counted yet
        self._store: Path | None = None  # attached, not read yet
        self._read: Path | None = None
        self._shared_keys: list[tuple[Ask, int]] | None = None
        self.tokenizer = tokenizer
        load_tokenizer(tokenizer)  # a bad spec fails here, not in a background thread

    def describe(self) -> dict:
        """What the card records: its name and tokenizer (a writer with settings of its own adds them)."""
        return {"name": self.name, "tokenizer": self.tokenizer}

    def asks(self) -> Sequence[Ask]:
        raise NotImplementedError

    def compose(self, ask: Ask, variant: int) -> str:
        raise NotImplementedError

    def __getstate__(self) -> dict:
        # Sent to workers without its memo: they compose what they need, and the memo can be large.
        return {**self.__dict__, "_cache": {}, "_texts": {}, "_read": None, "_shared_keys": None}

    def shared_keys(self) -> list[tuple[Ask, int]]:
        """The keys every large job draws from: each ask's distractor variants."""
        if self._shared_keys is None:
            self._shared_keys = self._shared_key_range(0, len(self.asks()) * OFFLINE_VARIANTS_PER_ASK)
        return self._shared_keys

    def _shared_key_range(self, start: int, stop: int) -> list[tuple[Ask, int]]:
        """`shared_keys()[start:stop]`, without building the whole list."""
        asks = self.asks()
        return [(asks[i // OFFLINE_VARIANTS_PER_ASK], i % OFFLINE_VARIANTS_PER_ASK) for i in range(start, stop)]

    def compose_part(self, start: int, stop: int, store: Path) -> None:
        """Compose and count `shared_keys()[start:stop]` into the part file `store/{start}.arrow`."""
        import pyarrow as pa  # loaded by the jobs that share their writings, not by every writer

        from .._parquet import int_array, text_array, write_arrow_atomic

        writings = self.writings(self._shared_key_range(start, stop))
        texts, counts = [w.text for w in writings], [w.n_tokens for w in writings]
        table = pa.table({"text": text_array(texts, pa.large_string()), "n_tokens": int_array(counts)})
        write_arrow_atomic(table, store / f"{start}.arrow")
        if store not in _COMPOSED:
            _COMPOSED.clear()
        _COMPOSED.setdefault(store, {})[start] = writings

    def attach(self, store: Path) -> None:
        """Take the shared keys' writings from the parts under `store` (read when first needed)."""
        if store != self._read:
            self._store = store

    def _read_store(self) -> None:
        """Every writing of the attached parts into the memo (a part that is missing is composed):
        those this process composed as they are, the others read from their files."""
        keys, store = self.shared_keys(), self._store
        held = _COMPOSED.pop(store, {}) if store else {}
        on_disk = {int(part.stem): part for part in store.glob("*.arrow")} if store else {}
        for start in sorted(held.keys() | on_disk.keys()):
            writings = held[start] if start in held else _read_part(on_disk[start])
            for key, writing in zip(keys[start : start + len(writings)], writings, strict=True):
                self._cache.setdefault(key, writing)
        self._read, self._store = self._store, None

    def writings(self, keys: Sequence[tuple[Ask, int]]) -> list[Writing]:
        missing = list(dict.fromkeys(key for key in keys if key not in self._cache))
        if self._store is not None and missing:
            self._read_store()
            missing = [key for key in missing if key not in self._cache]
        # One thread: tokenizing beside composing in a second thread gained nothing measurable
        # (both need the GIL often enough to convoy); the workers' processes are the parallelism.
        texts = [self._texts.pop(key) if key in self._texts else self.compose(*key) for key in missing]
        counts = count_tokens_batch(texts, num_threads=1, tokenizer=self.tokenizer)
        for key, text, n_tokens in zip(missing, texts, counts, strict=True):
            self._cache[key] = Writing(text=text, n_tokens=n_tokens)
        return [self._cache[key] for key in keys]

    def forget(self, keys: Sequence[tuple[Ask, int]]) -> None:
        """Drop these keys' writings from the memo: for a caller that keeps them in a form of its
        own (the openai assembler keeps each as JSON), so that a worker does not hold every writing
        twice. A key asked for again is composed again, to the same text."""
        for key in keys:
            self._cache.pop(key, None)

    def texts(self, keys: Sequence[tuple[Ask, int]]) -> list[str]:
        """The writings' texts, each composed once, without counting their tokens: for a caller that
        counts each text inside a larger one (an MRCR v2 turn), which would otherwise tokenize it twice.
        `writings` counts a text only when it is asked for one."""
        if self._store is not None:
            self._read_store()
        found = []
        for key in keys:
            writing = self._cache.get(key)
            if writing is not None:
                found.append(writing.text)
                continue
            text = self._texts.get(key)
            if text is None:
                text = self._texts[key] = self.compose(*key)
            found.append(text)
        return found


def _read_part(part: Path) -> list[Writing]:
    """The writings of a part file; none when it is cut short (a crash: parts are not fsynced)."""
    import pyarrow as pa

    from .._parquet import read_arrow

    try:
        table = read_arrow(part)
    except (OSError, pa.ArrowException):
        return []
    texts, counts = table.column("text").to_pylist(), table.column("n_tokens").to_pylist()
    return [Writing.model_construct(text=text, n_tokens=n_tokens) for text, n_tokens in zip(texts, counts, strict=True)]
