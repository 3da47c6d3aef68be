"""An MRCR v2 row re-solved from its flat text alone, written apart from mrcr_gen (its own
parsing), so tests and the chat server check the generator from outside."""

from __future__ import annotations

import re
from dataclasses import dataclass

ORDINAL_WORDS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth")
_FINAL = re.compile(
    r"User: Prepend (?P<hash>[A-Za-z0-9]{12}) to the (?P<ordinal>[a-z]+) (?P<what>.+) style\. "
    r"Do not include any other text in your response\.\n\nAssistant:$",
    re.DOTALL,
)
_BODY_MARK = "======== EXAMPLE 3 ========\n\n"


@dataclass
class Solved:
    hash: str
    ordinal: int  # 1-based
    ask: str
    turns: list[tuple[str, str, int]]  # (ask, writing, character offset of "User:") of every turn
    needle_turns: list[int]  # indices into turns of the queried key's turns

    @property
    def writings(self) -> list[str]:
        return [self.turns[i][1] for i in self.needle_turns]

    @property
    def expected_answer(self) -> str:
        return self.hash + self.writings[self.ordinal - 1]


def solve(queries: str) -> Solved:
    """Parse the final query and every turn; ValueError when the text is not v2-shaped."""
    last = queries.rfind("User: Prepend ")
    match = _FINAL.match(queries, last)
    if last < 0 or match is None:
        raise ValueError("no MRCR v2 final query at the end")
    head, style = match["what"].rsplit(" in a ", 1)
    ask = f"Write a {head} in {style} style."
    start = queries.index(_BODY_MARK) + len(_BODY_MARK)
    body = queries[start:last]
    if not body.endswith("\n\n"):
        raise ValueError("the transcript does not end with a blank line")
    turns = []
    offset = start
    for chunk in re.split(r"\n\n(?=User: Write a )", body[:-2]):
        if not chunk.startswith("User: "):
            raise ValueError(f"a turn does not start with 'User: ': {chunk[:60]!r}")
        turn_ask, writing = chunk[len("User: ") :].split("\n\nAssistant: ", 1)
        turns.append((turn_ask, writing, offset))
        offset += len(chunk) + 2
    needles = [i for i, turn in enumerate(turns) if turn[0] == ask]
    return Solved(match["hash"], ORDINAL_WORDS.index(match["ordinal"]) + 1, ask, turns, needles)
