"""Bootstrap intervals of a run's headline numbers: seeded, resampled within each cell, by the
summary's own rules."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from mrcr_gen import compare_runs
from mrcr_gen.eval._ci import bootstrap, paired_difference, within_noise
from mrcr_gen.eval._compare import noise_verdict, plot_compare
from mrcr_gen.eval._plots import plot_summary
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


def _write_run(run_dir, scores):
    """A run folder of openai/mrcr rows (one digest per row) with these scores."""
    run_dir.mkdir()
    records = [
        {"file": "d.parquet", "row": i, "digest": f"row{i}", "bin": SMALL, "bin_upper": 8192, "n_needles": 2,
         "status": "ok", "score": score}
        for i, score in enumerate(scores)
    ]  # fmt: skip
    (run_dir / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return run_dir


def test_paired_difference_resamples_the_shared_rows_together():
    a = {("d", 0): (SMALL, 2, 0.0), ("d", 1): (SMALL, 2, 1.0), ("d", 2): (LARGE, 2, 0.5)}
    b = {key: (cell, need, score + 0.1) for key, (cell, need, score) in a.items()} | {("d", 9): (SMALL, 2, 1.0)}
    paired = paired_difference(a, b)
    assert paired == {"rows": 3, "difference": 0.1, "interval": [0.1, 0.1], "within_noise": False}
    assert paired_difference(a, {("e", 0): (SMALL, 2, 1.0)}) is None  # nothing shared: nothing to pair
    same = paired_difference(a, a)
    assert same is not None and same["within_noise"] is True and same["interval"] == [0.0, 0.0]


def test_compare_reads_a_steady_gain_on_the_same_rows_beyond_noise(tmp_path):
    """Every row 0.05 better: the two runs' intervals overlap (wide spread of rows), yet the
    difference is no noise; the paired bootstrap over the shared rows says so."""
    scores = [0.0, 0.9, 0.1, 0.8, 0.2, 0.7, 0.3, 0.6, 0.4, 0.5]
    first = _write_run(tmp_path / "a", scores)
    second = _write_run(tmp_path / "b", [s + 0.05 for s in scores])
    entries = compare_runs([first, second])
    assert within_noise(entries[0]["ci"]["mean_score"], entries[1]["ci"]["mean_score"]) is True
    assert entries[1]["paired"]["rows"] == 10 and entries[1]["paired"]["within_noise"] is False
    assert noise_verdict(entries[1], entries[0]) == "+0.050 [+0.050, +0.050] (beyond noise, 10 rows paired)"
    assert entries[0]["paired"] is None
    other = _write_run(tmp_path / "c", scores)
    results = other / "results.jsonl"
    results.write_text(results.read_text().replace('"digest": "row', '"digest": "other'))  # other rows
    unpaired = compare_runs([first, other])[1]
    assert unpaired["paired"] is None
    assert noise_verdict(unpaired, entries[0]) == "+0.000 (within noise: intervals overlap)"


def _bands(monkeypatch):
    """The bands (x, low, high) the plots shade, as matplotlib is asked to draw them."""
    from matplotlib.axes import Axes

    drawn = []
    real = Axes.fill_between

    def recording(self, x, low, high, *args, **kwargs):
        drawn.append((list(x), list(low), list(high)))
        return real(self, x, low, high, *args, **kwargs)

    monkeypatch.setattr(Axes, "fill_between", recording)
    return drawn


def test_the_plots_shade_the_bins_intervals(tmp_path, monkeypatch):
    drawn = _bands(monkeypatch)
    records = [
        {
            "file": "f",
            "row": upper + i,
            "bin": label,
            "bin_upper": upper,
            "n_needles": 2,
            "status": "ok",
            "score": i / 10,
        }
        for i in range(10)
        for label, upper in ((SMALL, 8192), (LARGE, 16384))
    ]
    summary = summarize_records(records)
    plot_summary(summary, tmp_path / "plot.png")
    intervals = summary["ci"]["bins"]
    assert drawn == [([0, 1], [intervals[SMALL][0], intervals[LARGE][0]], [intervals[SMALL][1], intervals[LARGE][1]])]
    drawn.clear()
    entries = compare_runs([_write_run(tmp_path / "a", [0.1, 0.9, 0.5])])
    plot_compare(entries, tmp_path / "compare.png")
    assert drawn == [([0], [entries[0]["ci"]["bins"][SMALL][0]], [entries[0]["ci"]["bins"][SMALL][1]])]
