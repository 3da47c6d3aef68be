"""Hypothesis properties for every guarantee the assembler makes."""

from __future__ import annotations

import itertools
import json
import math
import random
import statistics
from collections import Counter
from functools import lru_cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.stats import chisquare

from mrcr_gen import Assembler, AssemblyError, OfflineWriter, bin_by_upper, row_token_count
from mrcr_gen._budget import interleave, needle_slots
from mrcr_gen.recipes.openai_mrcr._generate import DEFAULT_DATE_ADDED

from .structure import assert_mrcr_structure, needle_indices

SMALL_BINS = (8192, 16384, 32768)
properties = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@lru_cache(maxsize=None)
def assembler(writer_seed: int = 0) -> Assembler:
    return Assembler(OfflineWriter(writer_seed), date_added=DEFAULT_DATE_ADDED)


def sample(n: int, upper: int, seed: int):
    return assembler().sample(n_needles=n, seed=seed, token_bin=bin_by_upper(upper))


@properties
@given(n=st.integers(1, 8), upper=st.sampled_from(SMALL_BINS), seed=st.integers(0, 2**32))
def test_every_row_has_the_mrcr_structure(n, upper, seed):
    s = sample(n, upper, seed)
    assert_mrcr_structure(s.row)
    assert s.row.n_needles == n
    assert list(s.needle_indices) == needle_indices(s.row)
    assert s.needle_indices[s.target_ordinal - 1] == s.row.desired_msg_index


@properties
@given(n=st.integers(1, 8), upper=st.sampled_from(SMALL_BINS), seed=st.integers(0, 2**32))
def test_token_total_is_exact_and_inside_the_bin(n, upper, seed):
    s = sample(n, upper, seed)
    recount = row_token_count(json.loads(s.row.prompt), s.row.answer)
    assert recount == s.n_tokens
    assert recount in bin_by_upper(upper)
    assert s.bin == str(bin_by_upper(upper))


@properties
@given(n_slots=st.integers(1, 400), data=st.data(), seed=st.integers(0, 2**64))
def test_needle_slots_are_n_distinct_increasing_slots(n_slots, data, seed):
    n = data.draw(st.integers(1, n_slots))
    slots = needle_slots(random.Random(seed), n_slots, n)
    assert len(slots) == n and slots == sorted(set(slots)) and 0 <= slots[0] and slots[-1] < n_slots
    needles, others = [f"n{i}" for i in range(n)], [f"o{i}" for i in range(n_slots - n)]
    merged = interleave(needles, others, slots)
    assert [merged[i] for i in slots] == needles and [x for x in merged if x.startswith("o")] == others


@pytest.mark.parametrize(("n_slots", "n"), [(6, 2), (7, 3), (8, 4)])
def test_every_placement_is_reachable_and_equally_likely(n_slots, n):
    """Issue 33 item 1: the needles take any n of the slots, each set as likely (no stratum per needle)."""
    rng = random.Random(33)
    seen = Counter(tuple(needle_slots(rng, n_slots, n)) for _ in range(200 * math.comb(n_slots, n)))
    assert set(seen) == set(itertools.combinations(range(n_slots), n))
    assert chisquare(list(seen.values())).pvalue > 0.001, seen


@properties
@given(n=st.integers(1, 8), upper=st.sampled_from(SMALL_BINS), seed=st.integers(0, 2**32))
def test_needles_keep_their_order_and_the_target_is_one_of_them(n, upper, seed):
    s = sample(n, upper, seed)
    assert list(s.needle_indices) == sorted(set(s.needle_indices)) and len(s.needle_indices) == n
    assert 1 <= s.target_ordinal <= n and s.row.desired_msg_index == s.needle_indices[s.target_ordinal - 1]


def test_the_kth_needle_is_not_tied_to_the_kth_stratum():
    """Issue 33 item 1: with stratified placement the k-th of 4 needles was always in the k-th quarter
    of the conversation; placed uniformly, all four are in their own quarters in about a fifth of the
    rows (simulated from each row's own pair count), and the target is nearest its stratum's middle
    about as often as uniform placement predicts."""
    rng = random.Random(0)
    own, expected_own, nearest, expected_nearest, rows = 0, 0.0, 0, 0.0, 150
    for seed in range(rows):
        s = sample(4, 8192, seed)
        n_pairs = (s.row.total_messages - 2) // 2
        pairs = [(i - 1) // 2 for i in s.needle_indices]
        own += all(j * n_pairs // 4 <= p < (j + 1) * n_pairs // 4 for j, p in enumerate(pairs))
        nearest += depth_guess(pairs, n_pairs, s.target_ordinal) == s.target_ordinal - 1
        for _ in range(20):
            k, sim = rng.randint(1, 4), needle_slots(rng, n_pairs, 4)
            expected_own += all(j * n_pairs // 4 <= p < (j + 1) * n_pairs // 4 for j, p in enumerate(sim)) / 20
            expected_nearest += (depth_guess(sim, n_pairs, k) == k - 1) / 20
    assert abs(own - expected_own) <= 0.1 * rows, (own, expected_own)
    assert abs(nearest - expected_nearest) <= 0.1 * rows, (nearest, expected_nearest)
    assert own < 0.5 * rows


def depth_guess(pairs: list[int], n_pairs: int, k: int) -> int:
    """Index of the needle nearest depth (k - 0.5)/n of the conversation."""
    depth = (k - 0.5) / len(pairs)
    return min(range(len(pairs)), key=lambda j: abs((pairs[j] + 0.5) / n_pairs - depth))


@properties
@given(n=st.integers(2, 8), seed=st.integers(0, 2**32))
def test_distractor_asks_never_equal_the_needle_ask(n, seed):
    s = sample(n, 32768, seed)
    messages = json.loads(s.row.prompt)
    asks = [m["content"] for m in messages[1:-1:2]]
    needle = messages[s.row.desired_msg_index]["content"]
    assert asks.count(needle) == n


@pytest.mark.parametrize("tokens", [16384, 20000, 50000, 100000])
def test_tokens_targets_an_exact_total_within_one_percent(tokens):
    for seed in range(3):
        s = assembler().sample(n_needles=4, seed=seed, tokens=tokens)
        recount = row_token_count(json.loads(s.row.prompt), s.row.answer)
        assert recount == s.n_tokens
        assert tokens * 0.99 <= recount <= tokens


def test_lengths_spread_over_the_whole_bin():
    token_bin = bin_by_upper(16384)
    counts = [sample(2, 16384, seed).n_tokens for seed in range(60)]
    width = token_bin.upper - token_bin.lower
    quarters = Counter(min(3, (c - token_bin.lower) * 4 // width) for c in counts)
    assert all(quarters[q] >= 6 for q in range(4)), quarters


def test_target_ordinal_is_uniform():
    ordinals = Counter(sample(4, 8192, seed).target_ordinal for seed in range(200))
    assert set(ordinals) == {1, 2, 3, 4}
    assert all(30 <= count <= 70 for count in ordinals.values()), ordinals


def test_distractors_repeat_and_confound_at_the_real_rates():
    """Uniform draws over 438 x 10 asks, as the real data: repeats and same-format confounders occur."""
    repeated, same_format, same_entity, pairs = [], [], [], []
    for seed in range(12):
        s = sample(2, 262144, seed)
        messages = json.loads(s.row.prompt)
        needle = messages[s.row.desired_msg_index]["content"]
        asks = [m["content"] for m in messages[1:-1:2] if m["content"] != needle]
        pairs.append(len(asks))
        repeated.append(sum(1 for c in Counter(asks).values() if c > 1))
        same_format.append(sum(a.startswith(f"write a {s.format} about ") for a in asks) / len(asks))
        same_entity.append(sum(a.endswith(f" about {s.entity}") for a in asks))
    # Real 2needle row: 385 pairs, 22 repeated asks, 38 same-format and 1 same-entity distractors.
    expected_repeats = statistics.mean(p * (p - 1) / 2 / 4380 for p in pairs)
    assert 0.5 * expected_repeats <= statistics.mean(repeated) <= 1.5 * expected_repeats
    assert 0.07 <= statistics.mean(same_format) <= 0.13
    assert statistics.mean(same_entity) <= 3


def test_a_distractor_format_does_not_depend_on_its_position():
    """Each format's share among the first three and among the last three distractor pairs of 200
    rows is its share over all distractor pairs (the greedy fill once put the short riddles last)."""
    first, last, overall = Counter(), Counter(), Counter()
    for seed in range(200):
        s = sample(4, 32768, seed)
        messages = json.loads(s.row.prompt)
        formats = [
            messages[i]["content"].removeprefix("write a ").split(" about ")[0]
            for i in range(1, len(messages) - 1, 2)
            if i not in s.needle_indices
        ]
        first.update(formats[:3])
        last.update(formats[-3:])
        overall.update(formats)
    names = sorted(overall)
    assert len(names) == 10
    for where in (first, last):
        observed = [where[name] for name in names]
        expected = [sum(observed) * overall[name] / sum(overall.values()) for name in names]
        assert chisquare(observed, expected).pvalue > 0.001, dict(zip(names, observed))


def test_needle_writings_differ_but_repeated_distractor_asks_may_share_a_writing():
    shared = 0
    for seed in range(6):
        messages = json.loads(sample(8, 262144, seed).row.prompt)
        by_ask: dict[str, list[str]] = {}
        for ask, writing in zip(messages[1:-1:2], messages[2:-1:2]):
            by_ask.setdefault(ask["content"], []).append(writing["content"])
        shared += sum(len(w) - len(set(w)) for w in by_ask.values())
    assert shared > 0


def test_the_largest_bin():
    s = sample(8, 1048576, 7)
    assert_mrcr_structure(s.row)
    recount = row_token_count(json.loads(s.row.prompt), s.row.answer)
    assert recount == s.n_tokens and 524288 < recount <= 1048576


def test_impossible_requests_say_what_does_not_fit():
    with pytest.raises(AssemblyError, match="cannot fit 200 needles into \\[4096, 8192\\]"):
        sample(200, 8192, 0)


class _WritingsEndingWith(OfflineWriter):
    def __init__(self, ending: str) -> None:
        super().__init__(0)
        self.ending = ending

    def compose(self, ask, variant):
        return super().compose(ask, variant) + self.ending


@pytest.mark.parametrize(
    ("ending", "accepted"),
    [
        (" Zq9Zq9Zq9Z.", False),  # the secret in every writing: no row can have it
        (" \u00e9abcde.", True),  # in the prompt's JSON only, as the escape of é: a row may
    ],
)
def test_a_secret_in_a_text_is_drawn_again_and_one_only_in_an_escape_is_not(monkeypatch, ending, accepted):
    """A row's random string must appear in no message but the query; the assembler looks for it
    in the pairs' JSON and, where found, in their texts."""
    import sys

    import mrcr_gen.recipes.openai_mrcr._assembler as assembler_module

    secret = "Zq9Zq9Zq9Z" if not accepted else "u00e9abcde"
    drawn = assembler_module.random_string

    def forced(rng):  # every attempt's secret (the preamble's examples draw theirs as they did)
        value = drawn(rng)
        return secret if sys._getframe(1).f_code.co_name == "_attempt" else value

    monkeypatch.setattr(assembler_module, "random_string", forced)
    writer = _WritingsEndingWith(ending)
    a = Assembler(writer, date_added=DEFAULT_DATE_ADDED)
    if accepted:
        row = a.sample(n_needles=2, seed=1, token_bin=bin_by_upper(16384)).row
        assert row.random_string_to_prepend == secret and secret in row.prompt.split("Prepend")[0]
        assert all(secret not in m["content"] for m in json.loads(row.prompt)[:-1])
    else:
        with pytest.raises(AssemblyError):
            a.sample(n_needles=2, seed=1, token_bin=bin_by_upper(16384))


def test_same_seed_same_sample_in_any_order():
    first = [sample(4, 16384, seed).row for seed in (1, 2, 3)]
    fresh = Assembler(OfflineWriter(0), date_added=DEFAULT_DATE_ADDED)
    again = [fresh.sample(n_needles=4, seed=seed, token_bin=bin_by_upper(16384)).row for seed in (3, 2, 1)]
    assert first == again[::-1]


def test_rows_of_a_pair_without_a_note_are_uniform_in_total_and_needle_format():
    """Issue 19 item 8: where the needles fit under the bin's lower edge (no note), totals are uniform
    over the bin (Kolmogorov-Smirnov) and needle formats over the formats (chi-square); fixed seeds."""
    from scipy.stats import kstest

    from mrcr_gen import GenerateConfig
    from mrcr_gen.recipes.openai_mrcr._fit import check_needles_fit

    token_bin = bin_by_upper(8192)
    assert check_needles_fit(GenerateConfig(needles=(2,), bins=(token_bin,)), OfflineWriter(0)) == []
    samples = [sample(2, 8192, seed) for seed in range(200)]
    width = token_bin.upper - token_bin.smallest + 1
    assert kstest([(s.n_tokens - token_bin.smallest + 0.5) / width for s in samples], "uniform").pvalue > 0.01
    formats = Counter(s.format for s in samples)
    assert len(formats) == 10 and chisquare(list(formats.values())).pvalue > 0.01, formats


@pytest.mark.parametrize(
    ("needles", "upper", "verdict"),
    [
        (2, 8192, None),
        (4, 8192, "4 needles in [4096, 8192]: with 'short scene in a play' needles a row's preamble"),
        (8, 8192, "rows lean to the top of the bin and to formats of short writings"),
        (8, 16384, None),
        (16, 8192, "cannot fit 16 needles of every ask into [4096, 8192]: with 'short scene in a play' needles"),
        (64, 8192, "cannot fit 64 needles of every ask into [4096, 8192]"),
        (10000, 8192, "each needle is an ask of at least 5 tokens and a writing of at least 1, so 10000 needles take at least 60000 tokens"),
    ],
)
def test_pairs_whose_needles_do_not_fit_the_bin_get_a_note_or_are_refused_up_front(needles, upper, verdict):
    """Issue 19 items 8 and 14: 8 needles in [4096, 8192] lean (KS 0.19 in the issue) and say so; 10000
    needles are refused at once from a lower bound, 64 from what their needles typically take."""
    from mrcr_gen import GenerateConfig
    from mrcr_gen.recipes.openai_mrcr._fit import check_needles_fit

    config = GenerateConfig(needles=(needles,), bins=(bin_by_upper(upper),))
    if verdict is None or not verdict.startswith(("cannot", "each")):
        notes = check_needles_fit(config, OfflineWriter(0))
        assert notes == [] if verdict is None else (len(notes) == 1 and verdict in notes[0]), notes
    else:
        with pytest.raises(AssemblyError, match=verdict.replace("[", r"\[").replace("]", r"\]")):
            check_needles_fit(config, OfflineWriter(0))
