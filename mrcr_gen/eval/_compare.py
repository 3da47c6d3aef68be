"""`mrcr-eval compare RUN_DIR...`: a leaderboard of runs, one row each, and an overlay plot."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.table import Table

from .._bins import bin_sort_key
from ._ci import RowScores, format_interval, paired_difference, within_noise
from ._control import ALPHA, pair_controls, test_name
from ._failures import prefix_kept, target_share
from ._floors import Floor, control_floors
from ._items import EvalRecipe
from ._plots import finish_bin_plot, shade_intervals
from ._report import _fmt, bin_headers, counted_scores, read_run_dir, summarize_records


def compare_runs(run_dirs: Sequence[str | os.PathLike], *, recipes: Sequence[EvalRecipe]) -> list[dict[str, Any]]:
    """One entry per run (`compare_entry`); a control run (`--control`) comes right after its full
    run (same model and data; `full_run`) with its memorization test (`_control.memorization_test`).
    Each entry after the first has `paired`: its mean's difference from the first run's over the
    rows both ran, with its bootstrap interval (`_ci.paired_difference`; None without shared rows)."""
    entries, scores = [], {}
    for run_dir in run_dirs:
        records, run = read_run_dir(run_dir)
        entries.append(compare_entry(run_dir, summarize_records(records, run, recipes=recipes)))
        scores[str(run_dir)] = counted_scores(records, run)
    return paired_with_first(pair_controls(entries), scores)


def paired_with_first(entries: list[dict[str, Any]], scores: dict[str, RowScores]) -> list[dict[str, Any]]:
    """The entries, each after the first with `paired` (the first run itself: None)."""
    first = scores.get(entries[0]["run"]) if entries else None
    for entry in entries:
        own = scores.get(entry["run"])
        both = entry is not entries[0] and first is not None and own is not None
        entry["paired"] = paired_difference(first, own) if both and first and own else None
    return entries


def compare_entry(run: str | os.PathLike, summary: dict[str, Any]) -> dict[str, Any]:
    """The comparison entry of one run (a run directory, or an Inspect log) from its summary: model,
    rows, mean, AUCs, per-bin means (with their bootstrap 95% intervals, `ci`), the share of replies
    that kept their prefix and that returned the target (with its prefix, and at all), errors,
    cost, completeness, the control it is (if any) with its memorization test, and the sha256 of
    its data files."""
    outcomes = (summary.get("failures") or {}).get("outcomes") or []
    return {
        "run": str(run),
        "model": summary["model"],
        "rows": summary["n_rows"],
        "mean_score": summary["mean_score"],
        "auc_128k": summary["auc_128k"],
        "auc_1m": summary["auc_1m"],
        "bins": {b["bin"]: b["mean_score"] for b in summary["bins"]},
        "ci": summary.get("ci"),
        "prefix_kept": prefix_kept(outcomes),
        "target": target_share(outcomes),
        "target_with_prefix": target_share(outcomes, "ok"),
        "errors": summary["errors"]["count"] + len(summary["file_errors"]),
        "cost_usd": summary["cost_usd"],
        "complete": summary["complete"],
        "official": summary["official"],
        "control": summary.get("control"),
        "memorization": summary.get("memorization"),
        "data": sorted(e["sha256"] for e in summary.get("data") or [] if isinstance(e, dict) and "sha256" in e),
        "paired": None,  # the difference from the first run over shared rows (`paired_with_first`)
    }


def _all_bins(entries: list[dict[str, Any]]) -> list[str]:
    return sorted({label for entry in entries for label in entry["bins"]}, key=bin_sort_key)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _with_ci(entry: dict[str, Any], key: str) -> str:
    interval = (entry.get("ci") or {}).get(key)
    return f"{_fmt(entry[key])} {format_interval(interval, _fmt)}".rstrip()


def _signed(value: float) -> str:
    return f"{value:+.3f}"


def noise_verdict(entry: dict[str, Any], reference: dict[str, Any]) -> str:
    """How a run's mean differs from the reference run's: over the rows both ran when they share
    rows (`paired`: the difference's bootstrap 95% interval, within noise when it holds 0), else
    within noise when the runs' own intervals overlap; "-" for the reference itself or without
    means."""
    if entry is reference or entry["mean_score"] is None or reference["mean_score"] is None:
        return "-"
    paired = entry.get("paired")
    if paired and paired.get("interval"):
        verdict = "within noise" if paired["within_noise"] else "beyond noise"
        interval = format_interval(paired["interval"], _signed)
        return f"{_signed(paired['difference'])} {interval} ({verdict}, {paired['rows']} rows paired)"
    overlap = within_noise((entry.get("ci") or {}).get("mean_score"), (reference.get("ci") or {}).get("mean_score"))
    difference = f"{entry['mean_score'] - reference['mean_score']:+.3f}"
    if overlap is None:
        return difference
    return f"{difference} ({'within noise: intervals overlap' if overlap else 'beyond noise: intervals apart'})"


COMPARE_COLUMNS = ("run", "model", "rows", "mean [95% CI]", "vs first", "prefix kept", "target+prefix", "target",
                   "AUC@128k", "AUC@1M")  # fmt: skip


def compare_rows(entries: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """The leaderboard as text: its column names and one row per run (the terminal and the page print these)."""
    bins = _all_bins(entries)
    rows = []
    for entry in entries:
        official = "" if entry["official"] else " (NOT official)"
        kind = f" (control: {entry['control']})" if entry.get("control") else official
        flags = ("" if entry["complete"] else " (incomplete)") + kind
        intervals = (entry.get("ci") or {}).get("bins") or {}
        rows.append([
            entry["run"] + flags, str(entry["model"]), str(entry["rows"]), _with_ci(entry, "mean_score"),
            noise_verdict(entry, entries[0]), _pct(entry.get("prefix_kept")), _pct(entry.get("target_with_prefix")),
            _pct(entry.get("target")), _with_ci(entry, "auc_128k"), _with_ci(entry, "auc_1m"),
            *(f"{_fmt(entry['bins'].get(b))} {format_interval(intervals.get(b), _fmt)}".rstrip() for b in bins),
            str(entry["errors"]), "-" if entry["cost_usd"] is None else f"${entry['cost_usd']:,.2f}",
        ])  # fmt: skip
    return [*COMPARE_COLUMNS, *bin_headers(bins), "errors", "cost"], rows


COMPARE_CAPTION = (
    "in brackets: bootstrap 95% intervals (rows resampled within bin x needle cells); vs first: the mean's "
    "difference from the first run over the rows both ran, with its paired interval (within noise when it holds "
    "0), or, for runs that share no row, within noise when the runs' intervals overlap; target+prefix: the right "
    "writing with its prefix (target alone: with or without)"
)


def compare_table(entries: list[dict[str, Any]]) -> Table:
    columns, rows = compare_rows(entries)
    table = Table(title="MRCR runs")
    for name in columns:
        table.add_column(name, justify="left" if name in ("run", "model") else "right")
    for row in rows:
        table.add_row(*row)
    table.caption = COMPARE_CAPTION
    return table


def controls_table(entries: list[dict[str, Any]], floors: Sequence[Floor] = ()) -> Table | None:
    """The memorization test of each control run beside its full run, against the control floor
    of `floors` (the recipes' declarations); None when no run is a control."""
    controls = [entry for entry in entries if entry.get("control")]
    if not controls:
        return None
    tested = control_floors(floors)
    name = "; ".join(dict.fromkeys((entry.get("memorization") or {}).get("test") or "" for entry in controls))
    table = Table(title=f"Memorization controls ({name or test_name([f.name for f in tested])}, alpha {ALPHA:g})")
    floor = " / ".join(f.label for f in tested) or "floor"
    for name in ("control", "full run", "rows", "control mean", "full mean", floor, "difference"):
        table.add_column(name, justify="left" if name in ("control", "full run") else "right")
    table.add_column("needed", justify="right")
    table.add_column("p", justify="right")
    table.add_column("verdict")
    full_means = {entry["run"]: entry["mean_score"] for entry in entries if not entry.get("control")}
    for entry in controls:
        test = entry.get("memorization") or {}
        p_value = test.get("p_value")
        verdict = "too few rows" if p_value is None else "MEMORIZED" if test["memorized"] else "at the floor"
        table.add_row(
            f"{entry['run']} ({entry['control']})",
            entry.get("full_run") or "-",
            str(test.get("rows", 0)),
            _fmt(test.get("control_mean")),
            _fmt(full_means.get(entry.get("full_run") or "")),
            _fmt(test.get("floor_mean")),
            _fmt(test.get("difference")),
            "-" if test.get("margin") is None else f"> {test['margin']:.3f}",
            "-" if p_value is None else f"{p_value:.2g}",
            verdict,
        )
    return table


def overlay_png(entries: list[dict[str, Any]]) -> bytes:
    """`plot_compare`'s plot as PNG bytes (for the compare page)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="mrcr-compare-") as tmp:
        path = Path(tmp) / "compare.png"
        plot_compare(entries, path)
        return path.read_bytes()


def plot_compare(entries: list[dict[str, Any]], path: str | os.PathLike) -> None:
    """Mean score against context bin, one line per run, each bin's 95% interval shaded around it."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    bins = _all_bins(entries)
    figure, axes = plt.subplots(figsize=(8, 5), dpi=120)
    try:
        for entry in entries:
            points = [(i, entry["bins"][label]) for i, label in enumerate(bins) if entry["bins"].get(label) is not None]
            label = f"{entry['model']} ({Path(entry['run']).name})"
            (line,) = axes.plot([x for x, _ in points], [y for _, y in points], marker="o", label=label)
            shade_intervals(axes, bins, entry["bins"], (entry.get("ci") or {}).get("bins"), "", line.get_color())
        finish_bin_plot(
            figure, axes, bins, "MRCR - runs compared (shaded: bootstrap 95% intervals)", bool(entries), path
        )
    finally:
        plt.close(figure)
