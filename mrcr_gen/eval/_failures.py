"""The per-row analyses of a run's rows, what they add up to, and their plots.

From the records of a run (each scored row carries `analysis`, see `_analysis`):

* `outcomes`: per bin x needle count, the share of each outcome (`OUTCOMES`: what the reply
  returned, plus `error` for rows that were meant to be scored and failed and `skipped` for rows
  not sent, over the context window), with the prefix state crossed with it: `prefix` counts the
  cell's rows by prefix state (`ok`, `late`, `missing`; `none` for errors, skipped and unanalysed
  rows) and `crossed` each outcome's rows by prefix state, so a run that returns the right
  writing without its prefix (score 0) is told from one that returns it whole;
* `ordinal_confusion`: per needle count, how often the query asked for needle k and the reply
  returned needle j (`returned` of 0: not a needle, i.e. a distractor, text not in the
  conversation, or nothing);
* `depth`: per needle count, the mean score by target-depth decile x bin (a needle-in-a-haystack
  heatmap; depth is the share of the conversation's characters before the target needle's ask;
  one grid per needle count, as pooling them would mix the ordinal asked with the depth).
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from .._bins import bin_headers, bin_sort_key
from .._files import save_figure
from ._analysis import analyse_split
from ._items import EvalItem, EvalRecipe
from ._results import DEPTH_PLOT, ORDINALS_PLOT, OUTCOMES_PLOT
from ._shapes import FailureSummary

OUTCOMES = ("target", "other_needle", "distractor", "not_in_context", "empty", "error", "skipped")
PREFIX_STATES = ("ok", "late", "missing", "none")  # "none": no reply analysed (error, skipped, unanalysed)
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
    if record.get("status") in ("error", "skipped"):
        return str(record["status"])
    analysis = record.get("analysis")
    return analysis.get("returned") if isinstance(analysis, dict) else None


def depth_decile(depth: float) -> int:
    return min(int(depth * DECILES), DECILES - 1)


def prefix_of(record: dict[str, Any]) -> str:
    """The prefix state of a record's reply; "none" where no reply was analysed."""
    analysis = record.get("analysis")
    prefix = analysis.get("prefix") if isinstance(analysis, dict) and record.get("status") == "ok" else None
    return prefix if prefix in PREFIX_STATES else "none"


def failure_summary(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """`outcomes`, `ordinal_confusion` and `depth` (see the module docstring) of the records of a
    run (scored, errors and skipped rows)."""
    cells: dict[tuple[str, int], Counter] = defaultdict(Counter)
    confusion: dict[int, Counter] = defaultdict(Counter)
    depth: dict[int, dict[tuple[int, str], list[float]]] = defaultdict(lambda: defaultdict(list))
    analysed = 0
    for record in records:
        outcome = outcome_of(record)
        if outcome is None:
            continue
        n_needles = int(record.get("n_needles") or 0)
        cells[(record["bin"], n_needles)][(outcome, prefix_of(record))] += 1
        analysis = record.get("analysis")
        if not isinstance(analysis, dict) or record.get("status") != "ok":
            continue
        analysed += 1
        asked = analysis.get("target_ordinal")
        if isinstance(asked, int):
            confusion[n_needles][(asked, analysis.get("returned_ordinal") or NOT_A_NEEDLE)] += 1
        if analysis.get("target_depth") is not None and record.get("score") is not None:
            decile = depth_decile(float(analysis["target_depth"]))
            depth[n_needles][(decile, record["bin"])].append(float(record["score"]))
    return FailureSummary.model_validate(
        {
            "analysed_rows": analysed,
            "outcomes": [
                _outcome_cell(label, n, counts)
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
            "depth": [_depth_grid(n, grid) for n, grid in sorted(depth.items())],
        }
    ).model_dump()


def _outcome_cell(label: str, n_needles: int, counts: Counter) -> dict[str, Any]:
    """One bin x needle count: its outcome shares, its rows by prefix state, each outcome's by prefix state."""
    total = sum(counts.values())
    by_outcome = Counter({o: sum(c for (outcome, _), c in counts.items() if outcome == o) for o in OUTCOMES})
    return {
        "bin": label,
        "n_needles": n_needles,
        "count": total,
        "shares": {o: round(by_outcome[o] / total, 4) for o in OUTCOMES},
        "prefix": {p: sum(c for (_, prefix), c in counts.items() if prefix == p) for p in PREFIX_STATES},
        "crossed": {o: {p: counts[(o, p)] for p in PREFIX_STATES} for o in OUTCOMES if by_outcome[o]},
    }


def _depth_grid(n_needles: int, grid: dict[tuple[int, str], list[float]]) -> dict[str, Any]:
    bins = sorted({label for _, label in grid}, key=bin_sort_key)
    return {
        "n_needles": n_needles,
        "deciles": [f"{d * 10}-{d * 10 + 10}%" for d in range(DECILES)],
        "bins": bins,
        "mean_score": [[_mean_or_none(grid.get((d, label), [])) for label in bins] for d in range(DECILES)],
        "count": [[len(grid.get((d, label), [])) for label in bins] for d in range(DECILES)],
    }


def prefix_kept(cells: Sequence[dict[str, Any]]) -> float | None:
    """The share of the rows of some outcome cells whose reply started with its prefix."""
    total = sum(cell["count"] for cell in cells)
    return round(sum(cell["prefix"]["ok"] for cell in cells) / total, 4) if total else None


def target_share(cells: Sequence[dict[str, Any]], prefix: str | None = None) -> float | None:
    """The share of the rows of some outcome cells that returned the target (with `prefix` state only, if given)."""
    total = sum(cell["count"] for cell in cells)
    found = sum(
        count
        for cell in cells
        for state, count in cell.get("crossed", {}).get("target", {}).items()
        if prefix is None or state == prefix
    )
    return round(found / total, 4) if total else None


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
    "skipped": "#607d8b",
}
PANEL = (6.4, 4.8)  # inches of one panel: at 120 dpi, 768 x 576 px, readable at full size in the page


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _panels(plt: Any, count: int, extra_width: float = 0.0) -> tuple[Any, list[Any]]:
    """A figure of `count` panels stacked one above the other (each at full size)."""
    figure, axes = plt.subplots(
        max(count, 1), 1, figsize=(PANEL[0] + extra_width, PANEL[1] * max(count, 1)), dpi=120, squeeze=False
    )
    return figure, [row[0] for row in axes]


def _needles_title(n_needles: int) -> str:
    return f"{n_needles} needles" if n_needles else "no analysed rows"


def plot_depth(summary: dict[str, Any], path: str | os.PathLike, title: str) -> None:
    """Per needle count, the mean score by target depth (rows) x context bin (columns); blank
    where no row fell."""
    plt = _pyplot()
    grids = summary["depth"] or [{"n_needles": 0, "bins": [], "deciles": [], "mean_score": [], "count": []}]
    figure, axes_list = _panels(plt, len(grids), extra_width=1.0)
    try:
        for axes, grid in zip(axes_list, grids, strict=True):
            axes.set_title(f"{title}\n{_needles_title(grid['n_needles'])}")
            if not grid["bins"]:  # no analysed row: an empty, labelled chart rather than none
                axes.text(0.5, 0.5, "no analysed rows", ha="center", va="center", transform=axes.transAxes)
                continue
            values = [[float("nan") if v is None else v for v in row] for row in grid["mean_score"]]
            image = axes.imshow(values, cmap="RdYlGn", vmin=0, vmax=1, aspect="auto", origin="upper")
            for d, row in enumerate(grid["mean_score"]):
                for b, value in enumerate(row):
                    if value is not None:
                        axes.text(b, d, f"{value:.3f} ({grid['count'][d][b]})", ha="center", va="center", fontsize=8)
            axes.set_xticks(range(len(grid["bins"])), bin_headers(grid["bins"]))
            axes.set_yticks(range(len(grid["deciles"])), grid["deciles"])
            axes.set_xlabel("context length bin (upper edge)")
            axes.set_ylabel("target needle depth\n(share of characters before it)")
            figure.colorbar(image, ax=axes, label="mean score")
        save_figure(figure, path)
    finally:
        plt.close(figure)


def plot_ordinals(summary: dict[str, Any], path: str | os.PathLike, title: str) -> None:
    """One confusion matrix per needle count: needle asked (rows) x needle returned (columns)."""
    plt = _pyplot()
    matrices = summary["ordinal_confusion"] or [{"n_needles": 0, "asked": [], "returned": [], "counts": [[]]}]
    figure, axes_list = _panels(plt, len(matrices))
    try:
        for axes, matrix in zip(axes_list, matrices, strict=True):
            counts = matrix["counts"]
            if matrix["asked"]:
                axes.imshow(counts, cmap="Blues", aspect="equal")
                top = max(max(row) for row in counts) or 1
                for k, row in enumerate(counts):
                    for j, value in enumerate(row):
                        if value:  # white on the dark cells, so every count stays legible
                            color = "white" if value > top / 2 else "black"
                            axes.text(j, k, str(value), ha="center", va="center", fontsize=9, color=color)
            labels = [str(j) if j else "none" for j in matrix["returned"]]
            axes.set_xticks(range(len(labels)), labels)
            axes.set_yticks(range(len(matrix["asked"])), [str(k) for k in matrix["asked"]])
            axes.set_xlabel("needle returned")
            axes.set_ylabel("needle asked")
            axes.set_title(f"{title}\n{_needles_title(matrix['n_needles'])}")
        save_figure(figure, path)
    finally:
        plt.close(figure)


def plot_outcomes(summary: dict[str, Any], path: str | os.PathLike, title: str) -> None:
    """Stacked bars, one panel per needle count: the share of each outcome per bin, the part of
    each outcome whose reply did not start with its prefix hatched (a right writing without its
    prefix scores 0)."""
    from matplotlib.patches import Patch

    plt = _pyplot()
    by_needles: dict[int, list[dict]] = defaultdict(list)
    for cell in summary["outcomes"]:
        by_needles[cell["n_needles"]].append(cell)
    panels = sorted(by_needles.items()) or [(0, [])]
    figure, axes_list = _panels(plt, len(panels), extra_width=2.2)
    try:
        for axes, (n_needles, cells) in zip(axes_list, panels, strict=True):
            bottoms = [0.0] * len(cells)
            for outcome in OUTCOMES:
                for kept in (True, False):
                    heights = [_crossed_share(c, outcome, kept) for c in cells]
                    axes.bar(
                        range(len(cells)), heights, bottom=bottoms, color=OUTCOME_COLORS[outcome],
                        hatch=None if kept else "///", alpha=1.0 if kept else 0.55, edgecolor="white", linewidth=0.4,
                    )  # fmt: skip
                    bottoms = [b + h for b, h in zip(bottoms, heights, strict=True)]
            axes.set_xticks(range(len(cells)), bin_headers([c["bin"] for c in cells]))
            axes.set_ylim(0, 1.0)
            axes.set_xlabel("context length bin (upper edge)")
            axes.set_ylabel("share of rows")
            axes.set_title(f"{title}\n{_needles_title(n_needles) if n_needles else 'no rows'}")
            handles = [Patch(color=OUTCOME_COLORS[o], label=o) for o in OUTCOMES]
            handles.append(Patch(facecolor="#bbbbbb", hatch="///", edgecolor="white", label="prefix late / missing"))
            axes.legend(handles=handles, fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
        save_figure(figure, path)
    finally:
        plt.close(figure)


def _crossed_share(cell: dict[str, Any], outcome: str, kept: bool) -> float:
    """The share of a cell's rows of `outcome` whose prefix was kept (`kept`), or not; errors and
    skipped rows (no prefix to keep) count as kept, drawn plain."""
    crossed = cell.get("crossed", {}).get(outcome, {})
    plain = crossed.get("ok", 0) + crossed.get("none", 0)
    count = plain if kept else crossed.get("late", 0) + crossed.get("missing", 0)
    return count / cell["count"] if cell["count"] else 0.0


def needles_of(summary: dict[str, Any]) -> list[int]:
    """The needle counts a failure summary has rows of."""
    return sorted({cell["n_needles"] for cell in summary["outcomes"]})


def for_needles(summary: dict[str, Any], n_needles: int) -> dict[str, Any]:
    """The part of a failure summary about one needle count (for a plot of one panel)."""
    return summary | {
        key: [entry for entry in summary[key] if entry["n_needles"] == n_needles]
        for key in ("outcomes", "ordinal_confusion", "depth")
    }


PLOTTERS = ((OUTCOMES_PLOT, plot_outcomes, "what the replies returned"),
            (ORDINALS_PLOT, plot_ordinals, "needle asked x returned"),
            (DEPTH_PLOT, plot_depth, "score by needle depth"))  # fmt: skip


def write_failure_plots(summary: dict[str, Any], run_dir: str | os.PathLike, title: str) -> list[str]:
    """The three plots beside the run's `plot.png` (a panel per needle count, one above the
    other); returns their file names."""
    for plot, args in failure_plots(summary, run_dir, title):
        plot(*args)
    return [name for name, _, _ in PLOTTERS]


def failure_plots(
    summary: dict[str, Any], run_dir: str | os.PathLike, title: str
) -> list[tuple[Callable[..., None], tuple[Any, ...]]]:
    """The calls that draw `write_failure_plots`'s plots: (the plotter, its arguments)."""
    run_dir = os.fspath(run_dir)
    return [(plot, (summary, os.path.join(run_dir, name), f"{title}: {caption}")) for name, plot, caption in PLOTTERS]


def write_panel_plots(summary: dict[str, Any], folder: str | os.PathLike, title: str) -> list[str]:
    """The failure plots as one image per panel (needle count), for the HTML page: file names
    `plot_outcomes-8.png` and so on, in the order the page shows them."""
    names = []
    for name, plot, caption in PLOTTERS:
        for n_needles in needles_of(summary) or [0]:
            stem = name.removesuffix(".png")
            names.append(f"{stem}-{n_needles}.png")
            plot(for_needles(summary, n_needles), os.path.join(folder, names[-1]), f"{title}: {caption}")
    return names
