"""The assembler's per-ask facts (`ask_facts`), which a fork server works out once for its workers."""

from __future__ import annotations

import json

from mrcr_gen import Assembler, OfflineWriter
from mrcr_gen._models import normalize_ask
from mrcr_gen._tokens import count_tokens
from mrcr_gen.recipes.openai_mrcr._assembler import ask_facts
from mrcr_gen.recipes.openai_mrcr._generate import DEFAULT_DATE_ADDED


def test_ask_facts_are_each_asks_own_and_worked_out_once():
    """Each ask gets its own key, tokens, characters and JSON opening, and assemblers of the same
    asks share them (one computation per process)."""
    writer = OfflineWriter(seed=3)
    asks = tuple(writer.asks())
    facts = ask_facts(asks, "o200k_base")
    for i in (0, 1, 2000, len(asks) - 1):
        text = asks[i].text
        assert facts.keys[i] == normalize_ask(text) and facts.tokens[i] == count_tokens(text, "o200k_base")
        assert facts.chars[i] == len(text) and json.loads(f"[{facts.openings[i]}null}}]")[0]["content"] == text
        assert facts.index[asks[i]] == i
    first, second = Assembler(writer, DEFAULT_DATE_ADDED), Assembler(OfflineWriter(seed=4), DEFAULT_DATE_ADDED)
    assert first._keys is second._keys is facts.keys and first._index is facts.index
