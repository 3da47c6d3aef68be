"""mrcr_gen._matcher finds difflib's matching blocks exactly, so the floors it grades are the official numbers."""

from __future__ import annotations

import json
import random
from difflib import SequenceMatcher

import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from mrcr_gen import generate_sample
from mrcr_gen._matcher import matching_blocks, ratio
from mrcr_gen.recipes.mrcr_v2._grade import _score, grade_v2, grade_v2_fast, grade_v2_lenient
from mrcr_gen.recipes.openai_mrcr import _floors
from mrcr_gen.recipes.openai_mrcr._grade import grade, grade_fast, grade_lenient


def difflib_blocks(a: str, b: str) -> list[tuple[int, int, int]]:
    return [tuple(block) for block in SequenceMatcher(None, a, b).get_matching_blocks()]


def test_pinned_blocks_and_ratios():
    # difflib's own documented examples
    assert matching_blocks("abxcd", "abcd") == [(0, 0, 2), (3, 2, 2), (5, 4, 0)]
    assert matching_blocks(" abcd", "abcd abcd") == [(0, 4, 5), (5, 9, 0)]
    assert ratio("abcd", "bcde") == 0.75
    assert ratio("", "") == 1.0
    assert ratio("a", "") == 0.0
    assert matching_blocks("", "") == [(0, 0, 0)]


# Few distinct characters make long runs, ties and, past 200 characters, popular characters
# (autojunk); the rarer ones keep many runs alive, so windows are searched with numpy too.
FEW = st.text(st.sampled_from("ab c"), max_size=500)
MIXED = st.text(st.sampled_from("eeeeetttaaoo nnn  ..,TQzx!\n"), min_size=150, max_size=900)


@settings(max_examples=400, deadline=None)
@given(a=FEW, b=FEW)
@example(a="", b="")
@example(a="\ud800x\ud800", b="x\ud800")  # lone surrogates: Python strings may hold them
def test_blocks_equal_difflib_on_small_alphabets(a, b):
    assert matching_blocks(a, b) == difflib_blocks(a, b)


@settings(max_examples=500, deadline=None)
@given(data=st.data())
def test_blocks_equal_difflib_on_texts_of_any_few_characters(data):
    alphabet = data.draw(st.lists(st.sampled_from("abxyZ. "), min_size=1, max_size=5, unique=True))
    a = data.draw(st.text(st.sampled_from(alphabet), max_size=400))
    b = data.draw(st.text(st.sampled_from(alphabet), max_size=400))
    assert matching_blocks(a, b) == difflib_blocks(a, b)


def test_blocks_equal_difflib_on_a_sweep_of_random_texts():
    """3,000 seeded pairs over alphabets of 1 to 8 characters (ties between runs that start at
    the same place once a window cuts them are common there)."""
    rng = random.Random(1)
    for _ in range(3000):
        alphabet = "ab c"[: rng.randint(1, 4)] + "xyZ."[: rng.randint(0, 4)]
        a = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 400)))
        b = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 400)))
        assert matching_blocks(a, b) == difflib_blocks(a, b), (a, b)


@settings(max_examples=300, deadline=None)
@given(a=MIXED, b=MIXED)
def test_blocks_equal_difflib_on_text_with_popular_characters(a, b):
    assert matching_blocks(a, b) == difflib_blocks(a, b)
    assert ratio(a, b) == SequenceMatcher(None, a, b).ratio()


@settings(max_examples=200, deadline=None)
@given(a=st.text(max_size=300), b=st.text(max_size=300), shared=st.text(min_size=1, max_size=80))
def test_ratio_equals_difflib_on_any_text(a, b, shared):
    # a shared middle guarantees a long match somewhere inside both
    assert ratio(a + shared + b, b + shared + a) == SequenceMatcher(None, a + shared + b, b + shared + a).ratio()
    assert ratio(a, a) == 1.0 or not a


def test_blocks_equal_difflib_on_generated_writings():
    """Pairs of the offline writer's writings: the floors' real workload (1,500-character texts)."""
    writings = [
        message["content"]
        for seed in (1, 2)
        for message in json.loads(generate_sample(n_needles=4, bin_upper=8192, seed=seed).row.prompt)
        if message["role"] == "assistant"
    ]
    pairs = random.Random(0).sample([(a, b) for a in writings for b in writings], 150)
    assert any(len(a) >= 200 for a, _ in pairs)
    for a, b in pairs:
        assert matching_blocks(a, b) == difflib_blocks(a, b)


@settings(max_examples=300, deadline=None)
@given(
    rs=st.text(st.sampled_from("aB3"), max_size=4),
    body=st.text(st.sampled_from("abcAB 01\n.,é"), max_size=300),
    answer=st.text(st.sampled_from("abcAB 01\n.,é"), max_size=300),
    prefixed=st.booleans(),
)
def test_grade_fast_equals_the_official_grade(rs, body, answer, prefixed):
    response = rs + body if prefixed else body
    assert grade_fast(response, rs + answer, rs) == grade(response, rs + answer, rs)
    # the lenient grade's ratio comes from the matcher too: the same number as difflib's
    position = response.rfind(rs)
    expected = 0.0
    if position >= 0:
        candidate = response[position + len(rs) :].strip()
        expected = SequenceMatcher(None, candidate, (rs + answer).strip().removeprefix(rs).strip()).ratio()
    assert grade_lenient(response, rs + answer, rs) == expected


@settings(max_examples=300, deadline=None)
@given(
    secret=st.text(st.sampled_from("0123456789abcdef"), min_size=12, max_size=12),
    reply=st.text(st.sampled_from("ab cA.\n"), max_size=300),
    reference=st.text(st.sampled_from("ab cA.\n"), max_size=300),
    echo=st.booleans(),
)
def test_grade_v2_fast_equals_grade_v2(secret, reply, reference, echo):
    response = (secret + reply) if echo else reply
    assert grade_v2_fast(response, secret + reference) == grade_v2(response, secret + reference)
    assert grade_v2_lenient(response, secret + reference) == _score(response, secret + reference, strict=False)


def test_openai_floors_equal_the_floors_graded_by_difflib(monkeypatch):
    rows = [generate_sample(n_needles=n, bin_upper=8192, seed=seed).row for n, seed in ((2, 3), (8, 4))]
    fast = [_floors.row_floors(json.loads(row.prompt), row.answer, row.random_string_to_prepend) for row in rows]
    monkeypatch.setattr(_floors, "grade_fast", grade)
    official = [_floors.row_floors(json.loads(row.prompt), row.answer, row.random_string_to_prepend) for row in rows]
    assert fast == official
    assert all(0.0 < floors.random_writing < 1.0 for floors in fast)


def test_v2_floors_equal_the_floors_graded_by_difflib(v2_csv, monkeypatch):
    from mrcr_gen.recipes.mrcr_v2 import _eval

    rows = pd.read_csv(v2_csv).head(3)
    fast = [_eval.row_floors(row.queries, row.answer) for row in rows.itertuples()]
    monkeypatch.setattr(_eval, "grade_v2_fast", grade_v2)
    official = [_eval.row_floors(row.queries, row.answer) for row in rows.itertuples()]
    assert fast == official
    assert all(floors["floor_random_writing"] is not None for floors in fast)


@pytest.fixture(scope="module")
def v2_csv(tmp_path_factory):
    from mrcr_gen.recipes.mrcr_v2 import V2Config, V2OfflineWriter, generate_v2, v2_bucket

    out = tmp_path_factory.mktemp("v2") / "data"
    config = V2Config(needles=(2,), buckets=(v2_bucket(8192),), samples=3, rows_per_transcript=3, seed=7, out=out)
    generate_v2(config, V2OfflineWriter(7))
    (csv,) = out.rglob("*.csv")
    return csv
