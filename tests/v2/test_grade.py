"""grade_v2 (strict) and grade_v2_lenient, pinned by examples."""

from __future__ import annotations

from difflib import SequenceMatcher

import pytest

from mrcr_gen import grade, grade_v2, grade_v2_lenient

H = "Ab3dEf6hIj9K"  # 12 characters
ANSWER = H + "The tide comes in."


def test_exact_reply_scores_one_in_both():
    assert grade_v2(ANSWER, ANSWER) == 1.0
    assert grade_v2_lenient(ANSWER, ANSWER) == 1.0


def test_surrounding_whitespace_is_stripped():
    assert grade_v2(f"  \n{H} The tide comes in.  \n", ANSWER) == 1.0


def test_text_before_the_hash_strict_zero_lenient_full():
    reply = f"Sure! Here it is: {H}The tide comes in."
    assert grade_v2(reply, ANSWER) == 0.0
    assert grade_v2_lenient(reply, ANSWER) == 1.0


def test_last_occurrence_of_the_hash_counts():
    reply = f"{H} wrong guess {H}The tide comes in."
    assert grade_v2(reply, ANSWER) == 1.0
    assert grade_v2_lenient(reply, ANSWER) == 1.0


def test_argument_order_reference_first_changes_the_ratio():
    # SequenceMatcher's ratio is not symmetric: v2 puts the reference first, openai/mrcr the reply.
    reply = H + "in comes the tide"
    assert grade_v2(reply, ANSWER) == pytest.approx(14 / 35)  # a=reference, b=reply
    assert SequenceMatcher(a="in comes the tide", b="The tide comes in.").ratio() == pytest.approx(18 / 35)
    assert grade(reply, ANSWER, H) == pytest.approx(18 / 35)  # openai/mrcr: reply first
    assert grade_v2(reply, ANSWER) != grade(reply, ANSWER, H)


@pytest.mark.parametrize("reply", ["", "The tide comes in.", H[:11] + "The tide comes in.", None])
def test_no_hash_scores_zero(reply):
    assert grade_v2(reply, ANSWER) == 0.0
    assert grade_v2_lenient(reply, ANSWER) == 0.0


def test_partial_writing_scores_the_ratio():
    reply = H + "The tide"
    expected = SequenceMatcher(a="The tide comes in.", b="The tide").ratio()
    assert grade_v2(reply, ANSWER) == expected == pytest.approx(16 / 26)
