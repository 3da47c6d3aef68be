"""An MRCR v2 row as the per-row failure analysis reads it (`mrcr_gen.eval._analysis`)."""

from __future__ import annotations

import re

from ...eval._analysis import Transcript, Writing
from ._text import parse_query, split_transcript

# "Write a {format} about {topic} in {style} style.": styles are one word.
ASK_PATTERN = re.compile(r"Write an? (?P<format>.+?) about (?P<topic>.+) in (?P<style>\S+) style\.\Z", re.DOTALL)


def transcript_of(queries: str) -> Transcript | None:
    """The transcript's writings, indexed by turn (0-based, after the few-shot block); None when
    the final query or the few-shot block cannot be read."""
    split_at = queries.rfind("User: Prepend ")
    query = parse_query(queries[split_at:]) if split_at >= 0 else None
    parsed = split_transcript(queries[:split_at]) if query is not None else None
    if query is None or parsed is None:
        return None
    writings = []
    for k, turn in enumerate(parsed[1]):
        match = ASK_PATTERN.match(turn.ask)
        form, topic = (match["format"], match["topic"]) if match else ("", turn.ask)
        writings.append(Writing(index=k, text=turn.text, ask=turn.ask, format=form, entity=topic, offset=turn.start))
    return Transcript(
        writings=tuple(writings),
        needles=tuple(k for k, w in enumerate(writings) if w.ask == query.ask),
        target=query.ordinal,
        prefix=query.hash,
        length=len(queries),
        query=queries[split_at:],
    )
