"""Bootstrap intervals of a run's headline numbers: seeded, resampled within each cell, by the
summary's own rules."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mrcr_gen.eval._ci import bootstrap, within_noise
from mrcr_gen.eval._report import summarize_records

SMALL, LARGE = "(4096, 8192]", "(8192, 16384]"


def rows_of(scores_small, scores_large, n=2):
    return [(SMALL, 8192, n, s, True) for s in scores_small] + [(LARGE, 16384, n, s, True) for s in scores_large]


def test_the_same_rows_give_the_same_intervals_and_constant_cells_give_points():
    rows = rows_of([0.1, 0.9, 0.5, 0.3], [0.2, 0.4])
    assert bootstrap(rows, None) == bootstrap(rows, None)
    assert bootstrap(rows, None, seed=1) != bootstrap(rows, None)
    constant = bootstrap(rows_of([0.5] * 5, [0.25] * 3), None)
    assert constant["bins"] == {SMALL: [0.5, 0.5], LARGE: [0.25, 0.25]}
    assert constant["mean_score"] == [round((0.5 * 5 + 0.25 * 3) / 8, 4)] * 2
    assert constant["auc_128k"] is None  # bins of the 128k range without rows: no AUC, no interval


def test_skipped_rows_count_in_the_bins_not_in_the_mean():
    rows = [(SMALL, 8192, 2, 1.0, True)] * 3 + [(SMALL, 8192, 2, 0.0, False)]
    ci = bootstrap(rows, None)
    assert ci["mean_score"] == [1.0, 1.0]  # every replicate's counted rows score 1
    assert ci["bins"][SMALL] == [0.75, 0.75]  # the window, not chance, skips a row: no spread from it


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=1, max_size=12), st.lists(st.floats(0, 1), min_size=1, max_size=12))
def test_intervals_hold_their_estimates_range(small, large):
    ci = bootstrap(rows_of(small, large), None, replicates=200)
    for label, scores in ((SMALL, small), (LARGE, large)):
        low, high = ci["bins"][label]
        assert min(scores) - 1e-4 <= low <= high <= max(scores) + 1e-4
    every = small + large
    assert min(every) - 1e-4 <= ci["mean_score"][0] <= ci["mean_score"][1] <= max(every) + 1e-4


def test_within_noise_is_overlap():
    assert within_noise([0.2, 0.3], [0.25, 0.4]) is True
    assert within_noise([0.2, 0.3], [0.31, 0.4]) is False
    assert within_noise(None, [0.1, 0.2]) is None


def test_the_summary_carries_the_intervals_around_its_numbers():
    records = [
        {"file": "f", "row": i, "bin": SMALL, "bin_upper": 8192, "n_needles": 2, "status": "ok", "score": i / 10}
        for i in range(10)
    ] + [{"file": "f", "row": 10, "bin": SMALL, "bin_upper": 8192, "n_needles": 2, "status": "error", "score": None}]
    summary = summarize_records(records)
    ci = summary["ci"]
    assert ci["level"] == 0.95 and ci["seed"] == 0 and ci["replicates"] == 1000
    assert ci["mean_score"][0] <= summary["mean_score"] <= ci["mean_score"][1]
    assert ci["bins"][SMALL][0] <= summary["bins"][0]["mean_score"] <= ci["bins"][SMALL][1]
