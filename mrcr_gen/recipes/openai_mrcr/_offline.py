"""The offline writer of openai/mrcr: deterministic writings of its formats, memoized per ask and variant."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Sequence

from ..._models import Ask
from ..._tokens import DEFAULT_TOKENIZER
from ...writers._memo import OFFLINE_VARIANTS_PER_ASK, UNBOUNDED_VARIANTS, MemoizedWriter
from ._catalog import Catalog, load_catalog


class OfflineWriter(MemoizedWriter):
    """Deterministic, format-aware synthetic writings (our own lexicon and grammar; Faker names); needs no network."""

    name = "offline"

    def __init__(self, seed: int = 0, catalog: Catalog | None = None, tokenizer: str = DEFAULT_TOKENIZER) -> None:
        super().__init__(tokenizer)
        self.seed = seed
        self.catalog = catalog or load_catalog()
        self._asks: list[Ask] | None = None
        self._lengths = {
            spec.name: (spec.tokens.median, spec.tokens.p10, spec.tokens.p90) for spec in self.catalog.formats
        }

    def asks(self) -> Sequence[Ask]:
        if self._asks is None:
            self._asks = self.catalog.asks()
        return self._asks

    def __getstate__(self) -> dict:
        return {**super().__getstate__(), "_asks": None}  # rebuilt from the catalog: cheaper than pickled

    def n_variants(self, ask: Ask) -> int:
        return UNBOUNDED_VARIANTS

    def compose(self, ask: Ask, variant: int) -> str:
        from ._offline_formats import compose_writing

        return compose_writing(ask.format, ask.entity, variant, self.seed, self._lengths[ask.format])

    def describe(self) -> dict:
        # The text draws on Faker's word lists, so its version is part of what reproduces it.
        return {
            "name": self.name,
            "seed": self.seed,
            "variants_per_distractor_ask": OFFLINE_VARIANTS_PER_ASK,
            "faker": importlib.metadata.version("faker"),
        }
