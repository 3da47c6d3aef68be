"""The row checks about asks: near-duplicates of the needle ask, distractor asks of the wrong
form, and the needle ask written where it is not a needle (in the preamble's worked examples, in
a writing, inside another user message), which makes 'the k-th' ambiguous. Pure functions of the
parsed messages; `_checks` calls them."""

from __future__ import annotations

from collections.abc import Callable, Collection
from itertools import pairwise

from ..._models import ASK_PATTERN
from ...validate._asks import has_ask_line, is_loose_needle_ask, is_near_duplicate_ask
from ...validate._findings import Severity
from ._models import PREAMBLE_HEADER

#: add(check, message, severity)
AddFinding = Callable[[str, str, Severity], None]
_SHOWN = 70


def _short(text: str, limit: int = _SHOWN) -> str:
    """A one-line, bounded rendering of some text for a message."""
    text = text.replace("\n", "\\n")
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


def _indices(indices: Collection[int]) -> str:
    return "[" + ", ".join(map(str, indices)) + "]"


def is_preamble(message: dict) -> bool:
    content = message["content"]
    return message["role"] == "user" and (content.startswith(PREAMBLE_HEADER) or "======EXAMPLE======" in content)


def _near_needle_ask(text: str, ask: str | None) -> bool:
    """A near-duplicate that is only a warning: it differs from the needle ask by more than case,
    whitespace and trailing punctuation (those are `needle_ask_elsewhere`'s errors)."""
    return ask is not None and is_near_duplicate_ask(text, ask) and not is_loose_needle_ask(text, ask)


def near_duplicate_ask(messages: list[dict], ask: str | None, add: AddFinding) -> None:
    if ask is None:
        return
    near = [
        i for i, m in enumerate(messages[1:-1], start=1) if m["role"] == "user" and _near_needle_ask(m["content"], ask)
    ]
    if near:
        shown = ", ".join(f"{i}: {_short(messages[i]['content'], 60)}" for i in near[:5])
        add(
            "near_duplicate_ask",
            f"{len(near)} user message(s) equal the needle ask {ask!r} only up to case, whitespace or "
            f"punctuation (not counted as needles): {shown}",
            "warning",
        )


def needle_ask_elsewhere(messages: list[dict], ask: str | None, needles: Collection[int], add: AddFinding) -> None:
    """The needle ask as a whole line (up to case, spaces and punctuation, perhaps after `User:`)
    of the preamble, of any writing, or of a user message other than the needles and their
    near-duplicates (`near_duplicate_ask`'s); a user message that is the needle ask but for case,
    whitespace or trailing punctuation is one too: one more occurrence a model may count."""
    if ask is None:
        return
    needle_set = set(needles)
    found = [
        i
        for i, m in enumerate(messages[:-1])
        if i not in needle_set
        and not (m["role"] == "user" and _near_needle_ask(m["content"], ask))
        and (has_ask_line(m["content"], ask) or (m["role"] == "user" and is_loose_needle_ask(m["content"], ask)))
    ]
    if found:

        def where(i: int) -> str:
            if i == 0 and is_preamble(messages[0]):
                return "messages[0] (the preamble's worked examples)"
            if messages[i]["role"] == "user" and is_loose_needle_ask(messages[i]["content"], ask):
                text = _short(messages[i]["content"], 60)
                return f"messages[{i}] (a user ask {text}: the needle ask but for case or punctuation)"
            kind = "a writing" if messages[i]["role"] == "assistant" else f"a {messages[i]['role']} message"
            return f"messages[{i}] ({kind})"

        more = f" (and {len(found) - 5} more)" if len(found) > 5 else ""
        add(
            "needle_ask_elsewhere",
            f"the needle ask {ask!r} also stands as a line of {', '.join(map(where, found[:5]))}{more}: "
            "a model may count it, so the ordinal is ambiguous",
            "error",
        )


def ask_form(messages: list[dict], ask: str | None, add: AddFinding) -> None:
    """Distractor asks (user messages answered by an assistant writing, the preamble aside) of
    the form `write a {format} about {entity}`. Near-duplicates of the needle ask are
    `near_duplicate_ask`'s; misplaced messages are `structure`'s."""
    malformed = [
        i
        for i, (m, reply) in enumerate(pairwise(messages))
        if m["role"] == "user"
        and reply["role"] == "assistant"
        and m["content"] != ask
        and not ASK_PATTERN.fullmatch(m["content"])
        and not _near_needle_ask(m["content"], ask)
        and not (ask is not None and is_loose_needle_ask(m["content"], ask))
        and not is_preamble(m)
    ]
    if malformed:
        shown = ", ".join(f"{i}: {_short(messages[i]['content'], 60)}" for i in malformed[:5])
        add(
            "ask_form",
            f"{len(malformed)} distractor ask(s) not of the form 'write a {{format}} about {{entity}}': {shown}",
            "warning",
        )
