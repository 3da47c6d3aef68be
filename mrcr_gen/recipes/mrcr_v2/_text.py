"""The MRCR v2 text format: every string a transcript, a query or a few-shot block is built from,
and the parser that reads a row back from its flat text alone (used by the validator, the eval
reader and the tests' own re-solver is kept independent of it)."""

from __future__ import annotations

import re
from dataclasses import dataclass

HEADER = "Here are some examples of conversations succeeded by a follow-up question answered correctly:"
ASK = "Write a {format} about {topic} in {style} style."
TURN = "User: {ask}\n\nAssistant: {text}\n\n"
QUERY = (
    "User: Prepend {hash} to the {ordinal} {format} about {topic} in a {style} style. "
    "Do not include any other text in your response.\n\nAssistant:"
)
ORDINALS: tuple[str, ...] = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth")
HASH_LENGTH = 12
HASH_PATTERN = re.compile(r"[A-Za-z0-9]{12}")


def example_open(k: int) -> str:
    return f"======== EXAMPLE {k} ========\n\n"


def example_close(k: int) -> str:
    return f"\n\n======== END EXAMPLE {k} ========\n\n"


#: The transcript proper is presented as the third example: the few-shot block ends with this.
TRANSCRIPT_OPEN = example_open(3)

QUERY_RE = re.compile(
    r"User: Prepend (?P<hash>\S+) to the (?P<ordinal>" + "|".join(ORDINALS) + r") (?P<what>.+) style\. "
    r"Do not include any other text in your response\.\n\nAssistant:\Z",
    re.DOTALL,
)
# A turn starts at the beginning of the transcript body or right after a turn's closing blank line;
# matched with the blank line before it (the body starts after one): a pattern that starts with a
# literal is searched for that literal, ~100x faster on megabytes of text than a lookbehind.
TURN_HEAD_RE = re.compile(r"\n\nUser: (?P<ask>[^\n]*)\n\nAssistant: ")


def ask_text(format: str, topic: str, style: str) -> str:
    return ASK.format(format=format, topic=topic, style=style)


def turn_text(ask: str, text: str) -> str:
    return TURN.format(ask=ask, text=text)


def query_text(hash: str, ordinal: int, format: str, topic: str, style: str) -> str:
    return QUERY.format(hash=hash, ordinal=ORDINALS[ordinal - 1], format=format, topic=topic, style=style)


@dataclass(frozen=True)
class ParsedQuery:
    hash: str
    ordinal: int  # 1-based
    ask: str  # the needle ask the query refers to, as the turns spell it


def parse_query(view_ops: str) -> ParsedQuery | None:
    """The final query's hash, ordinal and the ask it refers to; None if it is not a v2 query."""
    match = QUERY_RE.match(view_ops)
    if match is None:
        return None
    head, sep, style = match["what"].rpartition(" in a ")
    if not sep:
        return None
    return ParsedQuery(
        hash=match["hash"],
        ordinal=ORDINALS.index(match["ordinal"]) + 1,
        ask=f"Write a {head} in {style} style.",
    )


@dataclass(frozen=True)
class ParsedTurn:
    start: int  # character offset of "User:" in the transcript
    end: int  # character offset just past the turn's closing blank line
    ask: str
    text: str


def split_transcript(transcript: str) -> tuple[int, list[ParsedTurn]] | None:
    """(character offset where the turns begin, the turns), or None when the few-shot block's
    closing marker is missing. A turn whose text does not end in a blank line is given with
    `end` at the next turn's start anyway; callers check `transcript[end-2:end] == "\\n\\n"`."""
    body_start = transcript.find(TRANSCRIPT_OPEN)
    if body_start < 0:
        return None
    body_start += len(TRANSCRIPT_OPEN)
    # TRANSCRIPT_OPEN ends with the blank line the first head is matched with.
    heads = list(TURN_HEAD_RE.finditer(transcript, body_start - 2))
    turns = []
    for i, head in enumerate(heads):
        end = heads[i + 1].start() + 2 if i + 1 < len(heads) else len(transcript)
        text = transcript[head.end() : end]
        turns.append(ParsedTurn(start=head.start() + 2, end=end, ask=head["ask"], text=text.removesuffix("\n\n")))
    return body_start, turns
