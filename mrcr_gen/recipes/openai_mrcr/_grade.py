"""The official MRCR grader (bit-exact with the seed) and a clearly labelled lenient variant."""

from __future__ import annotations

from collections.abc import Callable
from difflib import SequenceMatcher

from ..._matcher import ratio as fast_ratio


def _difflib_ratio(a: str, b: str) -> float:
    return SequenceMatcher(None, a, b).ratio()


def _score(response: str, answer: str, random_string: str, ratio: Callable[[str, str], float]) -> float:
    if not response.startswith(random_string):
        return 0.0
    return float(ratio(response.removeprefix(random_string), answer.removeprefix(random_string)))


def grade(response: str, answer: str, random_string_to_prepend: str) -> float:
    """The official openai/mrcr score, bit-exact with the seed's `grade()`.

    0 unless `response` starts with the random string; otherwise
    `SequenceMatcher(None, response_without_prefix, answer_without_prefix).ratio()`, with the
    response first and SequenceMatcher's defaults (autojunk on), exactly as the seed does.
    """
    return _score(response, answer, random_string_to_prepend, _difflib_ratio)


def grade_fast(response: str, answer: str, random_string_to_prepend: str) -> float:
    """`grade`, the same number (tests compare them), computed several times faster by
    `mrcr_gen._matcher`: for the reference floors' 20-odd grades per row. The official score
    itself stays on difflib."""
    return _score(response, answer, random_string_to_prepend, fast_ratio)


def grade_lenient(response: str, answer: str, random_string_to_prepend: str) -> float:
    """LENIENT, NOT THE OFFICIAL METRIC: forgives chatter around the answer.

    The random string may appear anywhere in the response; the text after its *last*
    occurrence is compared. Surrounding whitespace is stripped from both texts. Returns 0.0
    when the random string does not appear at all. Use it only as a diagnostic next to
    `grade`, never in its place.
    """
    position = response.rfind(random_string_to_prepend)
    if position < 0:
        return 0.0
    candidate = response[position + len(random_string_to_prepend) :].strip()
    expected = answer.strip().removeprefix(random_string_to_prepend).strip()
    return fast_ratio(candidate, expected)  # SequenceMatcher(None, candidate, expected).ratio()
