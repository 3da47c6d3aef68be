"""The MRCR v2 grader (google-deepmind/eval_hub `mrcr_v2`), strict by default, and its lenient variant.

Both strip the reply and the answer, take the hash as the answer's first 12 characters and the
reference as the rest (stripped), and score `SequenceMatcher(a=reference, b=reply_after_hash).ratio()`
with the text after the LAST occurrence of the hash. Note the order: the reference is `a`, the
reverse of openai/mrcr's grader (reply first); `ratio()` is not symmetric, so the order matters.

- `grade_v2` (strict, the metric Google reports): 0 unless the stripped reply starts with the hash.
- `grade_v2_lenient`: the hash may appear anywhere (the eval_hub script's code path).
- `grade_v2_fast`: `grade_v2`'s number from `mrcr_gen._matcher`, for the reference floors' many
  grades per row (the official score itself stays on difflib).
"""

from __future__ import annotations

from collections.abc import Callable
from difflib import SequenceMatcher

from ..._matcher import ratio as fast_ratio
from ._text import HASH_LENGTH


def _difflib_ratio(a: str, b: str) -> float:
    return SequenceMatcher(a=a, b=b).ratio()


def _score(
    response: object, answer: str, *, strict: bool, ratio: Callable[[str, str], float] = _difflib_ratio
) -> float:
    if not isinstance(response, str) or not response:
        return 0.0
    target = answer.strip()
    if len(target) < HASH_LENGTH:
        return 0.0
    secret, reference = target[:HASH_LENGTH], target[HASH_LENGTH:].strip()
    reply = response.strip()
    if strict and not reply.startswith(secret):
        return 0.0
    position = reply.rfind(secret)
    if position < 0:
        return 0.0
    return float(ratio(reference, reply[position + HASH_LENGTH :].strip()))


def grade_v2(response: str, answer: str) -> float:
    """The MRCR v2 score: 0 unless the stripped reply starts with the 12-character hash."""
    return _score(response, answer, strict=True)


def grade_v2_fast(response: str, answer: str) -> float:
    """`grade_v2`, the same number (tests compare them), computed several times faster."""
    return _score(response, answer, strict=True, ratio=fast_ratio)


def grade_v2_lenient(response: str, answer: str) -> float:
    """LENIENT, diagnostic: the hash may appear anywhere in the reply (its last occurrence counts)."""
    return _score(response, answer, strict=False, ratio=fast_ratio)
