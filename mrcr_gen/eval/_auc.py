"""One number per run, as Context Arena computes it: the area under the score-by-context curve.

The curve's points are the bins' mean scores at x = each bin's upper edge in tokens
(8192, 16384, ... 131072 for `auc_128k`; ... 1048576 for `auc_1m`). The area is the trapezoid
rule over those points divided by the x range, so a model scoring s in every bin gets s. A bin
lying beyond the model's context window (`max_context_window` at or below its lower edge, so
none of its rows can be sent) counts as 0; a bin within the window that has no rows makes the
AUC null: an unmeasured bin must not be guessed.
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
    ys = []
    for upper in edges:
        if beyond_window(upper, max_context_window):
            ys.append(0.0)
            continue
        mean = bin_means.get(upper)
        if mean is None:
            return None
        ys.append(mean)
    return trapezoid_auc(list(edges), ys)


def auc_fields(bin_means: Mapping[int, float | None], max_context_window: int | None) -> dict[str, float | None]:
    """auc_128k, auc_1m and the pointwise means of the 128k and 1M bins (0 beyond the window)."""

    def pointwise(upper: int) -> float | None:
        return 0.0 if beyond_window(upper, max_context_window) else bin_means.get(upper)

    return {
        "auc_128k": auc(bin_means, AUC_128K_EDGES, max_context_window),
        "auc_1m": auc(bin_means, AUC_1M_EDGES, max_context_window),
        "mean_128k": pointwise(131072),
        "mean_1m": pointwise(1048576),
    }
