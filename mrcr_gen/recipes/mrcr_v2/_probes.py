"""How the shortcut probes (`mrcr-validate --shortcuts`) read an MRCR v2 row: the turns of its
transcript that ask the query's key, their turn numbers, and grade_v2's score of one writing
against the target (the hash taken as right: reference first, both stripped)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from ..._matcher import ratio
from ...validate._shortcuts import ProbeRow, ProbeSpec
from ._harvest import pool_ask
from ._rows import coerce_record
from ._text import ParsedTurn, parse_query, split_transcript


@lru_cache(maxsize=2)
def _turns(transcript: str) -> tuple[ParsedTurn, ...] | None:
    """The transcript's turns, parsed once for the rows that share it."""
    split = split_transcript(transcript)
    return None if split is None else tuple(split[1])


def probe_row(record: dict[str, Any]) -> ProbeRow | None:
    rec = coerce_record(record)
    queries, view_ops = rec["queries"], rec["view_ops"]
    query = parse_query(view_ops)
    turns = _turns(queries[: len(queries) - len(view_ops)]) if queries.endswith(view_ops) else None
    if query is None or not turns:
        return None
    slots = tuple(i for i, turn in enumerate(turns) if turn.ask == query.ask)
    return ProbeRow(
        needles=tuple(turns[i].text for i in slots),
        slots=slots,
        n_slots=len(turns),
        k=query.ordinal,
        writings=tuple(turn.text for turn in turns),
        formats=tuple(ask.format if (ask := pool_ask(turn.ask)) is not None else "" for turn in turns),
    )


def score(reply: str, target: str) -> float:
    """grade_v2 of `hash + reply` against `hash + target`."""
    return ratio(target.strip(), reply.strip())


PROBES = ProbeSpec(row=probe_row, score=score)
