"""Reference floors: what guessing scores, computed from the data without any model call.

For a row with random string `rs`, answer `a` and needle writings `w_1..w_n`:

* random-needle floor: the expected official score of answering `rs + w_j` for a needle `j`
  drawn uniformly, i.e. `mean_j grade(rs + w_j, a, rs)` (exact, every needle is graded);
* random-writing floor: the expected score of answering `rs + w` for an assistant writing
  `w` of the conversation drawn uniformly. Long rows hold hundreds of writings, so the mean is
  taken over a fixed-seed sample of at most `writing_samples` of them (exact when fewer).

A model scoring near the random-needle floor found the right ask but not the right
occurrence; near the random-writing floor it is not retrieving at all.

The guesses are graded by `grade_fast`: `grade`'s number, from `mrcr_gen._matcher` instead of
pure-Python difflib, which made the floors 90% of a short row's grading.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from ._grade import grade_fast
from ._models import QUERY_PATTERN

DEFAULT_WRITING_SAMPLES = 16


class Floors(BaseModel):
    model_config = ConfigDict(frozen=True)

    random_needle: float | None
    random_writing: float | None


def needle_indices(messages: Sequence[dict]) -> list[int]:
    """0-based indices of the user asks that the final query refers to (empty if unparsable)."""
    match = QUERY_PATTERN.match(messages[-1]["content"]) if messages else None
    if match is None:
        return []
    ask = "write a " + match["rest"]
    return [
        i
        for i, m in enumerate(messages[:-1])
        if m["role"] == "user" and m["content"] == ask and i + 1 < len(messages) - 1
    ]


def writing_indices(messages: Sequence[dict]) -> list[int]:
    """0-based indices of the assistant writings between the preamble and the final query."""
    return [i for i in range(1, len(messages) - 1) if messages[i]["role"] == "assistant"]


def row_floors(
    messages: Sequence[dict],
    answer: str,
    random_string: str,
    *,
    writing_samples: int = DEFAULT_WRITING_SAMPLES,
    seed: int = 0,
) -> Floors:
    """The two reference floors of one row."""

    def mean_guess(indices: Sequence[int]) -> float | None:
        """The mean score of answering the random string plus the message at each index."""
        scores = [grade_fast(random_string + messages[i]["content"], answer, random_string) for i in indices]
        return sum(scores) / len(scores) if scores else None

    writings = writing_indices(messages)
    if len(writings) > writing_samples:
        writings = random.Random(f"{seed}:{random_string}").sample(writings, writing_samples)
    needle_writings = [i + 1 for i in needle_indices(messages)]
    return Floors(random_needle=mean_guess(needle_writings), random_writing=mean_guess(writings))
