"""The official MRCR grader (bit-exact with the seed) and a clearly labelled lenient variant."""

from __future__ import annotations

from difflib import SequenceMatcher

from ..._matcher import ratio as fast_ratio


def grade(response: str, answer: str, random_string_to_prepend: str) -> float:
    """The official openai/mrcr score, bit-exact with the seed's `grade()`.

    0 unless `response` starts with the random string; otherwise
    `SequenceMatcher(None, response_without_prefix, answer_without_prefix).ratio()`, with the
    response first and SequenceMatcher's defaults (autojunk on), exactly as the seed does.
    """
    if not response.startswith(random_string_to_prepend):
        return 0.0
    response = response.removeprefix(random_string_to_prepend)
    answer = answer.removeprefix(random_string_to_prepend)
    return float(SequenceMatcher(None, response, answer).ratio())


def grade_fast(response: str, answer: str, random_string_to_prepend: str) -> float:
    """`grade`, the same number (tests compare them), computed several times faster by
    `mrcr_gen._matcher`: for the reference floors' 20-odd grades per row. The official score
    itself stays on difflib."""
    if not response.startswith(random_string_to_prepend):
        return 0.0
    return fast_ratio(response.removeprefix(random_string_to_prepend), answer.removeprefix(random_string_to_prepend))


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
