"""Bootstrap 95% confidence intervals of a run's headline numbers.

With ten rows a cell, 0.247 against 0.327 can be noise: each headline number (`mean_score`, every
bin's mean, `auc_128k`, `auc_1m`) gets a percentile interval from `REPLICATES` resamples of the
run's rows. Rows are resampled with replacement WITHIN each bin x needle-count cell, so every
replicate has the run's design (as many rows of each cell; skipped rows, which the context window
decides and chance does not, are kept apart and resampled among themselves), and the numbers are computed by the
same rules as the summary's (errors count 0; skipped rows count 0 in the bins and AUCs and are not
in `mean_score`). The generator is seeded (`SEED`): the same rows give the same intervals.

`within_noise` is how `compare` reads two runs: their difference may be noise when their
intervals overlap (a conservative reading: runs on different rows cannot be paired).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .._bins import bin_sort_key
from ._auc import auc_fields
from ._shapes import Intervals

LEVEL = 0.95
REPLICATES = 1000
SEED = 0


def _cells(rows: Sequence[tuple[str, int | None, int, float, bool]]) -> dict[tuple[str, int, bool], list]:
    cells: dict[tuple[str, int, bool], list] = defaultdict(list)
    for label, _, n_needles, score, in_mean in rows:
        cells[(label, n_needles, in_mean)].append((score, in_mean))
    return cells


def bootstrap(
    rows: Sequence[tuple[str, int | None, int, float, bool]],
    max_context_window: int | None,
    replicates: int = REPLICATES,
    seed: int = SEED,
) -> dict[str, Any]:
    """The intervals of a run's rows, each row given as (bin label, bin upper edge, needle count,
    score as counted (0 for an error or a skipped row), whether it is in `mean_score`)."""
    rng = np.random.default_rng(seed)
    uppers = {label: upper for label, upper, _, _, _ in rows}
    total = np.zeros(replicates)
    in_mean = np.zeros(replicates)
    bin_sum: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(replicates))
    bin_count: dict[str, int] = defaultdict(int)
    cells = sorted(_cells(rows).items(), key=lambda kv: (bin_sort_key(kv[0][0]), *kv[0][1:]))
    for (label, _, _), members in cells:  # bins in their order: `bins` lists them so
        scores = np.array([score for score, _ in members], dtype=float)
        counted = np.array([flag for _, flag in members], dtype=float)
        picks = rng.integers(0, len(members), size=(replicates, len(members)))
        bin_sum[label] += scores[picks].sum(axis=1)
        bin_count[label] += len(members)
        total += (scores * counted)[picks].sum(axis=1)
        in_mean += counted[picks].sum(axis=1)
    bin_means = {label: bin_sum[label] / bin_count[label] for label in bin_sum}
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(in_mean > 0, total / np.maximum(in_mean, 1), np.nan)
    return Intervals.model_validate(
        {
            "level": LEVEL,
            "replicates": replicates,
            "seed": seed,
            "resampled": "rows within each bin x needle-count cell",
            "mean_score": _interval(means),
            "bins": {label: _interval(values) for label, values in bin_means.items()},
            **_auc_intervals(bin_sum, bin_count, uppers, max_context_window, replicates),
        }
    ).model_dump()


def _auc_intervals(
    bin_sum: dict[str, np.ndarray],
    bin_count: dict[str, int],
    uppers: dict[str, int | None],
    window: int | None,
    replicates: int,
) -> dict[str, list[float] | None]:
    """auc_128k and auc_1m per replicate, the rows of the bins of one upper edge pooled as the
    summary pools them."""
    sums: dict[int, np.ndarray] = defaultdict(lambda: np.zeros(replicates))
    counts: dict[int, int] = defaultdict(int)
    for label, values in bin_sum.items():
        upper = uppers.get(label)
        if upper is not None:
            sums[upper] = sums[upper] + values
            counts[upper] += bin_count[label]
    pooled = {upper: sums[upper] / counts[upper] for upper in sums}
    draws: dict[str, list[float]] = {"auc_128k": [], "auc_1m": []}
    for r in range(replicates):
        fields = auc_fields({upper: float(values[r]) for upper, values in pooled.items()}, window)
        for key in draws:
            value = fields[key]
            draws[key].append(float("nan") if value is None else value)
    return {key: _interval(np.array(values)) for key, values in draws.items()}


def _interval(values: np.ndarray) -> list[float] | None:
    """The central `LEVEL` percentile interval; None when any replicate has no value."""
    if values.size == 0 or bool(np.isnan(values).any()):
        return None
    tail = 100 * (1 - LEVEL) / 2
    low, high = np.percentile(values, [tail, 100 - tail])
    return [round(float(low), 4), round(float(high), 4)]


def within_noise(a: Sequence[float] | None, b: Sequence[float] | None) -> bool | None:
    """Whether two runs' intervals overlap (their difference may be noise); None without both."""
    if not a or not b:
        return None
    return a[0] <= b[1] and b[0] <= a[1]


def format_interval(interval: Sequence[float] | None, fmt: Callable[[float], str]) -> str:
    """The interval as "[low, high]" in `fmt`, or "" without one."""
    return "" if not interval else f"[{fmt(interval[0])}, {fmt(interval[1])}]"
