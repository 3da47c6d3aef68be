"""The greedy budget fill both recipes' assemblers use, and the error of a request that cannot be met."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol, TypeVar

# Give up filling the last gap after this many distractors in a row that do not fit.
MAX_FILL_MISSES = 64


class _Counted(Protocol):
    @property
    def tokens(self) -> int: ...


CountedT = TypeVar("CountedT", bound=_Counted)


def fill_budget(budget: int, draw: Callable[[int], Iterable[CountedT]]) -> list[CountedT]:
    """Items from successive `draw(tokens left)` batches, in drawing order, each kept when it fits
    the tokens left; stops when none are left or MAX_FILL_MISSES draws in a row did not fit."""
    chosen: list[CountedT] = []
    misses = 0
    while budget > 0 and misses < MAX_FILL_MISSES:
        for item in draw(budget):
            if item.tokens <= budget:
                chosen.append(item)
                budget -= item.tokens
                misses = 0
            else:
                misses += 1
                if misses >= MAX_FILL_MISSES:
                    break
    return chosen


class AssemblyError(ValueError):
    """The request cannot be met (e.g. the needles alone exceed the token budget)."""
