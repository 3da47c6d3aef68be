"""A mrcr-json row read back (`parse`), its grade, its answer form and how the core reads its rows (`ROWS`)."""

from __future__ import annotations

import json
import re
from collections import namedtuple
from difflib import SequenceMatcher
from typing import Any

from mrcr_gen.eval._analysis import SplitReply, Transcript, chat_transcript
from mrcr_gen.eval._chat import ChatRows
from mrcr_gen.eval._items import EvalItem

NAME = "mrcr-json"
QUERY = re.compile(
    r'Return the (?P<k>\d+)\w\w \(1 indexed\) (?P<what>.+?) as a JSON object \{"prefix": "(?P<rs>[^"]*)"'
)
#: The messages, the needles' ask, the ordinal asked for (1-based), the query's prefix, the needles' writings' indices.
Row = namedtuple("Row", "messages ask k prefix needles")


def parse(messages: Any) -> Row:
    """The row of a prompt's messages; ValueError (one line) unless they are messages ending in the query."""
    if not isinstance(messages, list) or any(
        not isinstance(m, dict) or not isinstance(m.get("content"), str) for m in messages
    ):
        raise ValueError("prompt is not a JSON list of {role, content} messages")
    query = QUERY.match(messages[-1]["content"]) if messages else None
    if query is None:
        raise ValueError("the last message is not the query for a JSON object")
    ask = "write a " + query["what"]
    needles = [i + 1 for i, m in enumerate(messages[:-2]) if m["content"] == ask and m.get("role") == "user"]
    return Row(messages, ask, int(query["k"]), query["rs"], needles)


def reply_object(reply: str) -> dict:
    try:
        found = json.loads(reply)
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def grade(reply: str, answer: str, prefix: str) -> float:
    """0 unless the reply is a JSON object whose `prefix` is the random string; else the MRCR ratio
    `SequenceMatcher(None, text, answer).ratio()` of its `text` against the writing asked for."""
    found = reply_object(reply)
    if found.get("prefix") != prefix or not isinstance(found.get("text"), str):
        return 0.0
    return SequenceMatcher(None, found["text"], answer).ratio()


class JsonAnswer:
    """The answer form: the prefix is `ok` in the object, `late` elsewhere in the reply; the body is
    the object's `text` (the whole reply when it is no JSON object)."""

    def split(self, reply: str, item: EvalItem) -> SplitReply:
        found = reply_object(reply)
        if found.get("prefix") == item.prefix:
            return SplitReply("ok", str(found.get("text", "")))
        return SplitReply("late" if item.prefix in reply else "missing", str(found.get("text", "")) if found else reply)


def transcript(item: EvalItem) -> Transcript | None:
    """The row's writings and needles, for the failure analysis."""
    try:
        row = parse(item.messages)
    except ValueError:
        return None
    return chat_transcript(item.messages, needle_ask=row.ask, target=row.k, prefix=item.prefix)


def check(messages: list[dict]) -> tuple[str, str] | None:
    """Why a row cannot be sent (its last message is no query for a JSON object), else None."""
    try:
        parse(messages)
    except ValueError as exc:
        return "final_query", str(exc)
    return None


def count_needles(messages: list[dict]) -> int:
    return len(parse(messages).needles)


#: Its rows are chat rows: the core reads them into items (`mrcr_gen.eval._chat`).
ROWS = ChatRows(NAME, count_needles, check)
