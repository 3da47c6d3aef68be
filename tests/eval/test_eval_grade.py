"""The official grader is bit-exact with the seed; the lenient one is pinned separately."""

from __future__ import annotations

from difflib import SequenceMatcher

from hypothesis import given, settings
from hypothesis import strategies as st

import mrcr_gen
from mrcr_gen.recipes.openai_mrcr._grade import grade, grade_lenient


def seed_grade(response, answer, random_string_to_prepend) -> float:
    """Verbatim from the seed."""
    if not response.startswith(random_string_to_prepend):
        return 0
    response = response.removeprefix(random_string_to_prepend)
    answer = answer.removeprefix(random_string_to_prepend)
    return float(SequenceMatcher(None, response, answer).ratio())


ALPHABET = st.sampled_from(list("abcAB 01\n.,é"))
TEXT = st.text(ALPHABET, max_size=60)


@settings(max_examples=600, deadline=None)
@given(rs=st.text(st.sampled_from(list("aB3")), max_size=4), body=TEXT, answer_body=TEXT, prefixed=st.booleans(), answer_prefixed=st.booleans())
def test_grade_equals_seed(rs, body, answer_body, prefixed, answer_prefixed):
    response = (rs + body) if prefixed else body
    answer = (rs + answer_body) if answer_prefixed else answer_body
    ours = grade(response, answer, rs)
    theirs = seed_grade(response, answer, rs)
    assert ours == theirs
    assert isinstance(ours, float)


@settings(max_examples=100, deadline=None)
@given(body=st.text(st.sampled_from(list("ab ")), min_size=200, max_size=400), answer=st.text(st.sampled_from(list("ab ")), min_size=200, max_size=400))
def test_grade_equals_seed_long_texts_with_autojunk(body, answer):
    # Over 200 characters SequenceMatcher's autojunk heuristic kicks in; the seed keeps it on.
    rs = "ZZZZZZZZZZ"
    assert grade(rs + body, rs + answer, rs) == seed_grade(rs + body, rs + answer, rs)


def test_fixed_cases():
    assert grade("abcXYZ", "abcXYZ", "abc") == 1.0
    assert grade("XYZ", "abcXYZ", "abc") == 0.0  # no prefix
    assert grade(" abcXYZ", "abcXYZ", "abc") == 0.0  # leading space: no prefix
    assert grade("abc", "abcXYZ", "abc") == 0.0  # prefix only: ratio of "" and "XYZ"
    assert grade("abcXYQ", "abcXYZ", "abc") == 2 * 2 / 6
    assert grade("abcabc", "abcabc", "abc") == 1.0  # removeprefix removes one occurrence only
    assert mrcr_gen.grade is grade


def test_argument_order_matters_and_matches_seed():
    a, b = " ac  c", "cbbcba"  # ratio 1/6 one way, 1/3 the other
    forward = SequenceMatcher(None, a, b).ratio()
    backward = SequenceMatcher(None, b, a).ratio()
    assert forward != backward
    rs = "RS"
    # The seed compares (response, answer): the response first.
    assert grade(rs + a, rs + b, rs) == forward
    assert grade(rs + a, rs + b, rs) != backward
    assert grade(rs + a, rs + b, rs) == seed_grade(rs + a, rs + b, rs)


def test_lenient_is_not_the_default_and_forgives_chatter():
    rs, answer = "Q1w2E3r4T5", "Q1w2E3r4T5The poem."
    chatty = "Sure! Here it is:\n Q1w2E3r4T5 The poem. \n"
    assert grade(chatty, answer, rs) == 0.0
    assert grade_lenient(chatty, answer, rs) == 1.0
    # last occurrence wins
    assert grade_lenient("Q1w2E3r4T5 wrong Q1w2E3r4T5The poem.", answer, rs) == 1.0
    assert grade_lenient("no hash at all: The poem.", answer, rs) == 0.0
    assert grade_lenient(answer, answer, rs) == grade(answer, answer, rs) == 1.0
