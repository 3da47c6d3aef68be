"""The per-row analyses of a run's rows, what they add up to, and their plots.

From the records of a run (each scored row carries `analysis`, see `_analysis`):

* `outcomes`: per bin x needle count, the share of each outcome (`OUTCOMES`: what the reply
  returned, plus `error` for rows that were meant to be scored and failed);
* `ordinal_confusion`: per needle count, how often the query asked for needle k and the reply
  returned needle j (`returned` of 0: not a needle, i.e. a distractor, text not in the
  conversation, or nothing);
* `depth`: the mean score by target-depth decile x bin (a needle-in-a-haystack heatmap; depth
  is the share of the conversation's characters before the target needle's ask).
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from .._bins import bin_headers, bin_sort_key
from .._files import save_figure
from ._analysis import analyse_split
from ._items import EvalItem, EvalRecipe
from ._results import DEPTH_PLOT, ORDINALS_PLOT, OUTCOMES_PLOT

OUTCOMES = ("target", "other_needle", "distractor", "not_in_context", "empty", "error")
DECILES = 10
NOT_A_NEEDLE = 0  # the `returned` column of the confusion matrix for replies that matched no needle


def analyse_item(recipe: EvalRecipe, item: EvalItem, reply: str, finish_reason: str | None = None) -> dict | None:
    """The analysis of `reply` (split by the recipe's answer form) to `item` as stored in a result
    record; None when the recipe cannot read the row's conversation."""
    transcript = recipe.transcript(item)
    if transcript is None:
        return None
    return analyse_split(recipe.answer_form.split(reply, item), transcript, finish_reason).model_dump()


def outcome_of(record: dict[str, Any]) -> str | None:
    """The outcome of a counted record; None for a scored row without an analysis."""
    if record.get("status") == "error":
        return "error"
    analysis = record.get("analysis")
    return analysis.get("returned") if isinstance(analysis, dict) else None


def depth_decile(depth: float) -> int:
    return min(int(depth * DECILES), DECILES - 1)


def failure_summary(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """`outcomes`, `ordinal_confusion` and `depth` (see the module docstring) of the counted
    records of a run (scored and errors; skipped rows are not counted)."""
    cells: dict[tuple[str, int], Counter] = defaultdict(Counter)
    confusion: dict[int, Counter] = defaultdict(Counter)
    depth: dict[tuple[int, str], list[float]] = defaultdict(list)
    analysed = 0
    for record in records:
        outcome = outcome_of(record)
        if outcome is None:
            continue
        n_needles = int(record.get("n_needles") or 0)
        cells[(record["bin"], n_needles)][outcome] += 1
        analysis = record.get("analysis")
        if not isinstance(analysis, dict):
            continue
        analysed += 1
        asked = analysis.get("target_ordinal")
        if isinstance(asked, int):
            confusion[n_needles][(asked, analysis.get("returned_ordinal") or NOT_A_NEEDLE)] += 1
        if analysis.get("target_depth") is not None and record.get("score") is not None:
            depth[(depth_decile(float(analysis["target_depth"])), record["bin"])].append(float(record["score"]))
    bins = sorted({label for _, label in depth}, key=bin_sort_key)
    return {
        "analysed_rows": analysed,
        "outcomes": [
            {
                "bin": label,
                "n_needles": n,
                "count": sum(counts.values()),
                "shares": {o: round(counts[o] / sum(counts.values()), 4) for o in OUTCOMES},
            }
            for (label, n), counts in sorted(cells.items(), key=lambda kv: (bin_sort_key(kv[0][0]), kv[0][1]))
        ],
        "ordinal_confusion": [
            {
                "n_needles": n,
                "asked": list(range(1, n + 1)),
                "returned": [*range(1, n + 1), NOT_A_NEEDLE],
                "counts": [[counts[(k, j)] for j in [*range(1, n + 1), NOT_A_NEEDLE]] for k in range(1, n + 1)],
            }
            for n, counts in sorted(confusion.items())
            if n > 0
        ],
        "depth": {
            "deciles": [f"{d * 10}-{d * 10 + 10}%" for d in range(DECILES)],
            "bins": bins,
            "mean_score": [[_mean_or_none(depth.get((d, label), [])) for label in bins] for d in range(DECILES)],
            "count": [[len(depth.get((d, label), [])) for label in bins] for d in range(DECILES)],
        },
    }


def _mean_or_none(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


# --- plots -----------------------------------------------------------------------------------

OUTCOME_COLORS = {
    "target": "#2e7d32",
    "other_needle": "#f9a825",
    "distractor": "#ef6c00",
    "not_in_context": "#8e24aa",
    "empty": "#9e9e9e",
    "error": "#c62828",
}


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def plot_depth(summary: dict[str, Any], path: str | os.PathLike, title: str) -> None:
    """The mean score by target depth (rows) x context bin (columns); blank where no row fell."""
    plt = _pyplot()
    depth = summary["depth"]
    bins = depth["bins"]
    grid = [[float("nan") if v is None else v for v in row] for row in depth["mean_score"]]
    figure, axes = plt.subplots(figsize=(max(5, 1.1 * len(bins) + 3), 5), dpi=120)
    try:
        if not bins:  # no analysed row: an empty, labelled chart rather than none
            axes.text(0.5, 0.5, "no analysed rows", ha="center", va="center", transform=axes.transAxes)
            axes.set_title(title)
            save_figure(figure, path)
            return
        image = axes.imshow(grid, cmap="RdYlGn", vmin=0, vmax=1, aspect="auto", origin="upper")
        for d, row in enumerate(depth["mean_score"]):
            for b, value in enumerate(row):
                if value is not None:
                    axes.text(b, d, f"{value:.2f}\n({depth['count'][d][b]})", ha="center", va="center", fontsize=7)
        axes.set_xticks(range(len(bins)), bin_headers(bins))
        axes.set_yticks(range(len(depth["deciles"])), depth["deciles"])
        axes.set_xlabel("context length bin (upper edge)")
        axes.set_ylabel("target needle depth (share of characters before it)")
        axes.set_title(title)
        figure.colorbar(image, ax=axes, label="mean score")
        save_figure(figure, path)
    finally:
        plt.close(figure)


def plot_ordinals(summary: dict[str, Any], path: str | os.PathLike, title: str) -> None:
    """One confusion matrix per needle count: needle asked (rows) x needle returned (columns)."""
    plt = _pyplot()
    matrices = summary["ordinal_confusion"] or [{"n_needles": 0, "asked": [], "returned": [], "counts": [[]]}]
    figure, axes_list = plt.subplots(1, len(matrices), figsize=(4.5 * len(matrices), 4.5), dpi=120, squeeze=False)
    try:
        for axes, matrix in zip(axes_list[0], matrices, strict=True):
            counts = matrix["counts"]
            if matrix["asked"]:
                axes.imshow(counts, cmap="Blues", aspect="equal")
                for k, row in enumerate(counts):
                    for j, value in enumerate(row):
                        if value:
                            axes.text(j, k, str(value), ha="center", va="center", fontsize=7)
            labels = [str(j) if j else "none" for j in matrix["returned"]]
            axes.set_xticks(range(len(labels)), labels)
            axes.set_yticks(range(len(matrix["asked"])), [str(k) for k in matrix["asked"]])
            axes.set_xlabel("needle returned")
            axes.set_ylabel("needle asked")
            axes.set_title(f"{matrix['n_needles']} needles" if matrix["n_needles"] else "no analysed rows")
        figure.suptitle(title)
        save_figure(figure, path)
    finally:
        plt.close(figure)


def plot_outcomes(summary: dict[str, Any], path: str | os.PathLike, title: str) -> None:
    """Stacked bars: the share of each outcome per bin, one panel per needle count."""
    plt = _pyplot()
    by_needles: dict[int, list[dict]] = defaultdict(list)
    for cell in summary["outcomes"]:
        by_needles[cell["n_needles"]].append(cell)
    panels = sorted(by_needles.items()) or [(0, [])]
    figure, axes_list = plt.subplots(1, len(panels), figsize=(4.5 * len(panels), 4.5), dpi=120, squeeze=False)
    try:
        for axes, (n_needles, cells) in zip(axes_list[0], panels, strict=True):
            bottoms = [0.0] * len(cells)
            for outcome in OUTCOMES:
                heights = [c["shares"][outcome] for c in cells]
                axes.bar(range(len(cells)), heights, bottom=bottoms, color=OUTCOME_COLORS[outcome], label=outcome)
                bottoms = [b + h for b, h in zip(bottoms, heights, strict=True)]
            axes.set_xticks(range(len(cells)), bin_headers([c["bin"] for c in cells]))
            axes.set_ylim(0, 1.0)
            axes.set_xlabel("context length bin (upper edge)")
            axes.set_ylabel("share of rows")
            axes.set_title(f"{n_needles} needles" if n_needles else "no rows")
        axes_list[0][-1].legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
        figure.suptitle(title)
        save_figure(figure, path)
    finally:
        plt.close(figure)


def write_failure_plots(summary: dict[str, Any], run_dir: str | os.PathLike, title: str) -> list[str]:
    """The three plots beside the run's `plot.png`; returns their file names."""
    run_dir = os.fspath(run_dir)
    plot_depth(summary, os.path.join(run_dir, DEPTH_PLOT), f"{title}: score by needle depth")
    plot_ordinals(summary, os.path.join(run_dir, ORDINALS_PLOT), f"{title}: needle asked x returned")
    plot_outcomes(summary, os.path.join(run_dir, OUTCOMES_PLOT), f"{title}: what the replies returned")
    return [DEPTH_PLOT, ORDINALS_PLOT, OUTCOMES_PLOT]
