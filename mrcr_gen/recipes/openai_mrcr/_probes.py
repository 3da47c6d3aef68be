"""How the shortcut probes (`mrcr-validate --shortcuts`) read an openai/mrcr row: the needle asks
the final query names, their ask slots among the conversation's ask/writing pairs, and the score
of one writing against the target as the official grader gives it (the prefix taken as right)."""

from __future__ import annotations

import json
from typing import Any

from ..._matcher import ratio
from ...pool._pool import parse_ask
from ...validate._shortcuts import ProbeRow, ProbeSpec
from ._floors import needle_indices
from ._models import QUERY_PATTERN


def probe_row(record: dict[str, Any]) -> ProbeRow | None:
    """The row's needles in order, their slots (pair j is messages 2j+1 and 2j+2), k and every writing."""
    messages = json.loads(record["prompt"])
    match = QUERY_PATTERN.match(messages[-1]["content"])
    needles = needle_indices(messages)
    if match is None or not needles:
        return None
    pairs = (len(messages) - 2) // 2
    writings = tuple(messages[2 * j + 2]["content"] for j in range(pairs))
    asks = [parse_ask(messages[2 * j + 1]["content"]) for j in range(pairs)]
    return ProbeRow(
        needles=tuple(messages[i + 1]["content"] for i in needles),
        slots=tuple((i - 1) // 2 for i in needles),
        n_slots=pairs,
        k=int(match["ordinal"]),
        writings=writings,
        formats=tuple(ask.format if ask is not None else "" for ask in asks),
    )


def score(reply: str, target: str) -> float:
    """openai/mrcr's grade of `prefix + reply` against `prefix + target`: SequenceMatcher(reply, target)."""
    return ratio(reply, target)


PROBES = ProbeSpec(row=probe_row, score=score)
