"""One number per run, as Context Arena computes it: the area under the score-by-context curve.

The curve's points are the bins' mean scores at x = each bin's upper edge in tokens
(8192, 16384, ... 131072 for `auc_128k`; ... 1048576 for `auc_1m`). The area is the trapezoid
rule over those points divided by the x range, so a model scoring s in every bin gets s.

A bin's mean is over every row of the bin: a row that does not fit the model's context window
(skipped, never sent) counts 0, like an error, so a window inside a bin lowers that bin. A bin
without rows lying beyond the window (`max_context_window` at or below its lower edge, so none
of its rows could be sent) counts 0; a bin without rows within the window makes the AUC null:
an unmeasured bin must not be guessed.
"""

from __future__ import annotations

from collections.abc import Mapping

from .._bins import BINS

AUC_128K_EDGES: tuple[int, ...] = tuple(b.upper for b in BINS if b.upper <= 131072)
AUC_1M_EDGES: tuple[int, ...] = tuple(b.upper for b in BINS if b.upper <= 1048576)
_LOWER = {b.upper: b.lower for b in BINS}


def trapezoid_auc(xs: list[int], ys: list[float]) -> float:
    """Trapezoid area under (xs, ys) divided by the x range."""
    area = sum((xs[i + 1] - xs[i]) * (ys[i] + ys[i + 1]) / 2 for i in range(len(xs) - 1))
    return area / (xs[-1] - xs[0])


def beyond_window(bin_upper: int, max_context_window: int | None) -> bool:
    """True when no row of the bin fits the window: the window ends at or below the bin's lower edge."""
    return max_context_window is not None and max_context_window <= _LOWER[bin_upper]


def auc(
    bin_means: Mapping[int, float | None],
    edges: tuple[int, ...],
    max_context_window: int | None = None,
) -> float | None:
    """The AUC over `edges` of {bin upper edge: mean score}; None when a bin in range has no rows."""
    ys = [_point(bin_means, upper, max_context_window) for upper in edges]
    if any(y is None for y in ys):
        return None
    return trapezoid_auc(list(edges), [y for y in ys if y is not None])


def _point(bin_means: Mapping[int, float | None], upper: int, max_context_window: int | None) -> float | None:
    """A bin's mean; 0 for a bin without rows beyond the window; None for one without rows within it."""
    mean = bin_means.get(upper)
    if mean is None and beyond_window(upper, max_context_window):
        return 0.0
    return mean


def auc_fields(bin_means: Mapping[int, float | None], max_context_window: int | None) -> dict[str, float | None]:
    """auc_128k, auc_1m and the pointwise means of the 128k and 1M bins (0 without rows beyond the window)."""
    return {
        "auc_128k": auc(bin_means, AUC_128K_EDGES, max_context_window),
        "auc_1m": auc(bin_means, AUC_1M_EDGES, max_context_window),
        "mean_128k": _point(bin_means, 131072, max_context_window),
        "mean_1m": _point(bin_means, 1048576, max_context_window),
    }
