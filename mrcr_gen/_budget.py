"""What both recipes' assemblers share: the greedy budget fill, where the needles go among the
other turns, and the error of a request that cannot be met."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
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


T = TypeVar("T")


def needle_slots(rng: random.Random, n_slots: int, n_needles: int) -> list[int]:
    """Where n needles go among `n_slots` turns, in increasing order: every set of n slots equally
    likely, as in the official data. Nothing ties a needle's ordinal to a depth (one needle per
    equal stratum once did: "the needle nearest depth (k - 0.5)/n" was then almost always the k-th)."""
    return sorted(rng.sample(range(n_slots), n_needles))


def interleave(needles: Sequence[T], others: Sequence[T], slots: Sequence[int]) -> list[T]:
    """`needles` in order at `slots` (increasing, from `needle_slots`), `others` in order around them."""
    needle_iter, other_iter, at = iter(needles), iter(others), set(slots)
    return [next(needle_iter) if i in at else next(other_iter) for i in range(len(needles) + len(others))]


class AssemblyError(ValueError):
    """The request cannot be met (e.g. the needles alone exceed the token budget)."""
