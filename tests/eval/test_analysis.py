"""The per-row failure analysis: which writing a reply returned, its prefix, depth and truncation,
checked against what the generator knows of each row (its needle indices and target) and, for
MRCR v2, against the tests' own re-solver."""

from __future__ import annotations

import difflib
import json
from functools import cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcr_gen import generate_sample
from mrcr_gen.eval._analysis import MATCH_THRESHOLD, analyse_reply
from mrcr_gen.recipes.mrcr_v2._analysis import transcript_of as v2_transcript_of
from mrcr_gen.recipes.openai_mrcr._analysis import transcript_of
from mrcr_gen.recipes.openai_mrcr._grade import grade


@cache
def sample(n_needles: int, seed: int):
    return generate_sample(n_needles=n_needles, bin_upper=8192, seed=seed)


def row_of(n_needles: int, seed: int):
    s = sample(n_needles, seed)
    messages = json.loads(s.row.prompt)
    return s, messages, transcript_of(messages, s.row.random_string_to_prepend)


@pytest.mark.parametrize("n_needles,seed", [(2, 1), (4, 2), (8, 3), (8, 4)])
def test_each_needle_returned_is_named_by_its_ordinal(n_needles, seed):
    s, messages, transcript = row_of(n_needles, seed)
    rs = s.row.random_string_to_prepend
    assert [transcript.writings[k].index for k in transcript.needles] == list(s.needle_indices)
    for ordinal, index in enumerate(s.needle_indices, start=1):
        analysis = analyse_reply(rs + messages[index + 1]["content"], transcript)
        expected = "target" if ordinal == s.target_ordinal else "other_needle"
        assert (analysis.prefix, analysis.returned, analysis.returned_ordinal) == ("ok", expected, ordinal)
        assert analysis.returned_index == index and analysis.match_ratio == 1.0 and not analysis.truncated
        before = sum(len(m["content"]) for m in messages[:index])
        assert analysis.returned_depth == round(before / sum(len(m["content"]) for m in messages), 4)
    depth = analyse_reply(s.row.answer, transcript).target_depth
    before = sum(len(m["content"]) for m in messages[: s.row.desired_msg_index])
    assert depth == round(before / sum(len(m["content"]) for m in messages), 4) and 0 < depth < 1


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 5), cut=st.floats(0.0, 0.4), at=st.floats(0.0, 1.0))
def test_an_edited_target_is_still_the_target(seed, cut, at):
    """A target with a piece cut out is found as the target while the official grade still calls
    it close; the diagnosis measure is at least the grade (it forgives what difflib's junk rule
    does not)."""
    s, messages, transcript = row_of(4, seed)
    rs = s.row.random_string_to_prepend
    text = messages[s.row.desired_msg_index + 1]["content"]
    start = int(at * len(text) * (1 - cut))
    reply = rs + text[:start] + text[start + int(cut * len(text)) :]
    analysis = analyse_reply(reply, transcript)
    score = grade(reply, s.row.answer, rs)
    if score >= MATCH_THRESHOLD:
        assert (analysis.returned, analysis.returned_ordinal) == ("target", s.target_ordinal)
        assert analysis.match_ratio >= round(score, 4) - 0.05


def official_rule(response: str, answer: str, prefix: str) -> float:
    """The openai/mrcr grader as published: 0 without the prefix at the start, else difflib's
    ratio (defaults, autojunk on) of the reply and the answer, both without the prefix."""
    if not response.startswith(prefix):
        return 0.0
    return difflib.SequenceMatcher(None, response.removeprefix(prefix), answer.removeprefix(prefix)).ratio()


@settings(max_examples=80, deadline=None)
@given(
    seed=st.integers(0, 5),
    edit=st.sampled_from(["exact", "upper", "repeat", "insert", "late", "missing", "free"]),
    free=st.text(max_size=300),
    at=st.floats(0.0, 1.0),
)
def test_the_official_score_is_exactly_the_official_graders(seed, edit, free, at):
    """Whatever the diagnosis does, the score stays difflib's ratio with the official prefix rule."""
    s = sample(4, seed)
    rs, answer = s.row.random_string_to_prepend, s.row.answer
    text = answer[len(rs) :]
    cut = int(at * len(text))
    reply = {
        "exact": answer,
        "upper": rs + text.upper(),
        "repeat": rs + "\n".join([text] * 5),
        "insert": rs + text[:cut] + "\n" + free + "\n" + text[cut:],
        "late": free + rs + text,
        "missing": text,
        "free": rs + free,
    }[edit]
    assert grade(reply, answer, rs) == official_rule(reply, answer, rs)


def test_messy_replies_find_their_writing_with_flags():
    """One inserted line, the target repeated 60 times, in upper case, the prefix written last: each
    is the target, flagged for what was unusual; the official grade is untouched."""
    s, _, transcript = row_of(8, 3)
    rs, answer = s.row.random_string_to_prepend, s.row.answer
    text = answer[len(rs) :]
    lines = text.split("\n")
    inserted = rs + "\n".join([lines[0], "Here it is, as you asked, word for word:", *lines[1:]])
    expected = {
        inserted: ("ok", False, False, False),
        rs + "\n".join([text] * 60): ("ok", True, False, False),
        rs + text.upper(): ("ok", False, True, False),
        text + "\n" + rs: ("late", False, False, True),
    }
    for reply, (prefix, repeated, upper, before) in expected.items():
        analysis = analyse_reply(reply, transcript)
        assert (analysis.prefix, analysis.returned, analysis.returned_ordinal) == (prefix, "target", s.target_ordinal)
        assert (analysis.repeated, analysis.case_changed, analysis.before_prefix) == (repeated, upper, before)
        assert analysis.match_ratio >= 0.95
    assert grade(rs + text.upper(), answer, rs) < 0.5  # the score itself stays the official one
    distractor = next(w for k, w in enumerate(transcript.writings) if k not in transcript.needles)
    shouted = analyse_reply(rs + distractor.text.upper(), transcript)  # found by its casefolded fragments
    assert (shouted.returned, shouted.returned_index, shouted.case_changed) == ("distractor", distractor.index, True)
    looping = analyse_reply(rs + "the cat and the dog " * 4000, transcript)  # no writing reachable: none compared
    assert (looping.returned, looping.match_ratio, looping.returned_index) == ("not_in_context", 0.0, None)
    dumped = analyse_reply(rs + "\n".join(w.text for w in transcript.writings), transcript)  # holds every writing
    assert (dumped.returned, dumped.returned_ordinal) == ("target", s.target_ordinal)


def test_a_distractor_is_located_and_compared_with_the_needle_ask():
    s, messages, transcript = row_of(4, 5)
    rs = s.row.random_string_to_prepend
    needle = transcript.writings[transcript.needles[0]]
    others = [w for k, w in enumerate(transcript.writings) if k not in transcript.needles]
    assert others
    for writing in others:
        analysis = analyse_reply(rs + writing.text, transcript)
        assert (analysis.returned, analysis.returned_index, analysis.returned_ordinal) == (
            "distractor",
            writing.index,
            None,
        )
        assert messages[writing.index]["content"] == writing.ask
        assert analysis.same_format == (writing.format == needle.format)
        assert analysis.same_entity == (writing.entity == needle.entity)
        assert analysis.same_format is not None and not (analysis.same_format and analysis.same_entity)


def test_prefix_states_empty_not_in_context_and_truncation():
    s, _, transcript = row_of(2, 6)
    rs, answer = s.row.random_string_to_prepend, s.row.answer
    target = answer[len(rs) :]
    assert analyse_reply(target, transcript).prefix == "missing"
    late = analyse_reply("Sure! " + rs + target, transcript)
    assert (late.prefix, late.returned, late.match_ratio) == ("late", "target", 1.0)
    assert analyse_reply(rs, transcript).returned == "empty"
    assert analyse_reply(rs + "  \n", transcript).returned == "empty"
    assert analyse_reply("", transcript).model_dump()["returned"] == "empty"
    alien = analyse_reply(rs + "Zebra quantum marmalade " * 20, transcript)
    assert alien.returned == "not_in_context" and alien.match_ratio < MATCH_THRESHOLD and alien.returned_index is None
    cut = analyse_reply(answer[: len(answer) // 2], transcript, finish_reason="length")
    assert cut.truncated and cut.returned == "target"
    assert not analyse_reply(answer, transcript, finish_reason="stop").truncated


def test_a_row_without_a_readable_query_has_no_transcript():
    assert transcript_of([{"role": "user", "content": "hello"}], "abc") is None
    assert transcript_of([], "abc") is None
    assert v2_transcript_of("no query here") is None
