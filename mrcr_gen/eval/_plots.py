"""The charts of a run: RUN_DIR/plot.png (mean score by context bin, a line per needle count) and
the failure analysis's plots beside it, drawn side by side where a long run's grading processes
run (`_pipeline.run_side_by_side`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .._bins import bin_headers, bin_sort_key
from .._files import save_figure
from ._failures import failure_plots
from ._floors import Floor
from ._pipeline import run_side_by_side
from ._results import PLOT_NAME


def write_plots(summary: dict[str, Any], run_dir: str | os.PathLike, floors: Sequence[Floor]) -> None:
    """RUN_DIR/plot.png (with the `floors` it plots) and the failure plots (`_failures`), of `summary`.
    A long run's grading fork server draws them side by side (it imported matplotlib during the run)."""
    title = f"MRCR - {summary.get('model') or 'model'}"
    plots: list[tuple[Callable[..., None], tuple[Any, ...]]] = [
        (plot_summary, (summary, Path(run_dir) / PLOT_NAME, floors))
    ]
    run_side_by_side(plots + failure_plots(summary["failures"], run_dir, title))


def plot_summary(summary: dict[str, Any], path: str | os.PathLike, floors: Sequence[Floor] = ()) -> None:
    """Mean score against context bin, one line per needle count (dotted: each of `floors` that is
    `plotted`, e.g. the random-needle floor)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    bins = sorted({c["bin"] for c in summary["cells"]}, key=bin_sort_key)
    position = {label: i for i, label in enumerate(bins)}
    figure, axes = plt.subplots(figsize=(8, 5), dpi=120)
    try:
        colors = plt.rcParams["axes.prop_cycle"].by_key().get("color", ["C0"])
        for i, n_needles in enumerate(sorted({c["n_needles"] for c in summary["cells"]})):
            cells = [c for c in summary["cells"] if c["n_needles"] == n_needles]
            cells.sort(key=lambda c: bin_sort_key(c["bin"]))
            xs = [position[c["bin"]] for c in cells]
            color = colors[i % len(colors)]
            axes.plot(xs, [c["mean_score"] for c in cells], marker="o", color=color, label=f"{n_needles} needles")
            for floor in floors:
                points = [(x, c[floor.name]) for x, c in zip(xs, cells, strict=True) if c.get(floor.name) is not None]
                if floor.plotted and points:
                    axes.plot(
                        [x for x, _ in points],
                        [y for _, y in points],
                        linestyle=":",
                        color=color,
                        alpha=0.6,
                        label=f"{n_needles} needles: {floor.title}",
                    )
        means = {b["bin"]: b["mean_score"] for b in summary["bins"]}
        shade_intervals(axes, bins, means, (summary.get("ci") or {}).get("bins"), "all rows", "black")
        finish_bin_plot(figure, axes, bins, f"MRCR - {summary.get('model') or 'model'}", bool(summary["cells"]), path)
    finally:
        plt.close(figure)


def shade_intervals(
    axes: Any, bins: list[str], means: dict[str, float | None], intervals: dict[str, list[float]] | None, label: str,
    color: Any,
) -> None:  # fmt: skip
    """Shade each bin's bootstrap 95% interval around the line of its means (the bins that have
    one); `label` names the line in the legend ("" when a line of `means` is drawn already)."""
    bands = intervals or {}
    points = [(i, b) for i, b in enumerate(bins) if bands.get(b) and means.get(b) is not None]
    if not points:
        return
    xs = [x for x, _ in points]
    if label:
        ys = [means[b] for _, b in points]
        axes.plot(xs, ys, color=color, linewidth=1, alpha=0.7, label=f"{label} (shaded: 95% interval)")
    axes.fill_between(xs, [bands[b][0] for _, b in points], [bands[b][1] for _, b in points], color=color, alpha=0.12)


def finish_bin_plot(figure: Any, axes: Any, bins: list[str], title: str, legend: bool, path: str | os.PathLike) -> None:
    """Label a score-by-bin chart (x: the bins in order) and write it atomically as PNG."""
    axes.set_xticks(range(len(bins)))
    axes.set_xticklabels(bin_headers(bins))
    axes.set_xlabel("context length bin (o200k tokens, upper edge)")
    axes.set_ylabel("mean score (official grader; errors and skipped rows count 0)")
    axes.set_ylim(0, 1.02)
    axes.grid(True, alpha=0.3)
    axes.set_title(title)
    if legend:
        axes.legend(fontsize="small")
    save_figure(figure, path)
