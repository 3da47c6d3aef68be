"""Writers that compose text on demand and tokenize each distinct writing exactly once."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Sequence

from .._catalog import Catalog, load_catalog
from .._models import Ask, Writing
from .._tokens import DEFAULT_TOKENIZER, count_tokens_batch, load_tokenizer, tokenizer_threads

# A real ask gets one of a few writings: 2 of 23 repeated asks got the identical one in real rows.
OFFLINE_VARIANTS_PER_ASK = 8
# Offline variants are unbounded (any needle count works); distractors use the first few only.
UNBOUNDED_VARIANTS = 1 << 30


COMPOSE_CHUNK = 128


class MemoizedWriter:
    """Base for writers whose text is a pure function of (ask, variant)."""

    name = "memoized"

    def __init__(self, tokenizer: str = DEFAULT_TOKENIZER) -> None:
        self._cache: dict[tuple[Ask, int], Writing] = {}
        self.tokenizer = tokenizer
        load_tokenizer(tokenizer)  # a bad spec fails here, not in a background thread

    def compose(self, ask: Ask, variant: int) -> str:
        raise NotImplementedError

    def writings(self, keys: Sequence[tuple[Ask, int]]) -> list[Writing]:
        missing = list(dict.fromkeys(key for key in keys if key not in self._cache))
        # Composing holds the GIL, tokenizing releases it: tokenize each chunk in the
        # background while the next one is composed, so both cores work.
        pending = []
        for start in range(0, len(missing), COMPOSE_CHUNK):
            chunk = missing[start : start + COMPOSE_CHUNK]
            texts = [self.compose(ask, variant) for ask, variant in chunk]
            pending.append((chunk, texts, tokenizer_threads().submit(count_tokens_batch, texts, 1, self.tokenizer)))
        for chunk, texts, counts in pending:
            for key, text, n_tokens in zip(chunk, texts, counts.result()):
                self._cache[key] = Writing(text=text, n_tokens=n_tokens)
        return [self._cache[key] for key in keys]


class OfflineWriter(MemoizedWriter):
    """Deterministic, format-aware synthetic writings (Faker vocabulary); needs no network."""

    name = "offline"

    def __init__(self, seed: int = 0, catalog: Catalog | None = None, tokenizer: str = DEFAULT_TOKENIZER) -> None:
        super().__init__(tokenizer)
        self.seed = seed
        self.catalog = catalog or load_catalog()
        self._asks = self.catalog.asks()
        self._lengths = {
            spec.name: (spec.tokens.median, spec.tokens.p10, spec.tokens.p90) for spec in self.catalog.formats
        }

    def asks(self) -> Sequence[Ask]:
        return self._asks

    def n_variants(self, ask: Ask) -> int:
        return UNBOUNDED_VARIANTS

    def compose(self, ask: Ask, variant: int) -> str:
        from ._offline import compose_writing

        return compose_writing(ask.format, ask.entity, variant, self.seed, self._lengths[ask.format])

    def describe(self) -> dict:
        # The text draws on Faker's word lists, so its version is part of what reproduces it.
        return {
            "name": self.name,
            "seed": self.seed,
            "variants_per_distractor_ask": OFFLINE_VARIANTS_PER_ASK,
            "faker": importlib.metadata.version("faker"),
        }
