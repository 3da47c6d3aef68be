"""Reports of a run: RUN_DIR/summary.json, a rich table and RUN_DIR/plot.png."""

from __future__ import annotations

import json
import os
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from .._bins import bin_sort_key, bin_upper
from .._files import atomic_path, write_text_atomic
from ._results import (
    PLOT_NAME,
    RESULTS_NAME,
    RUN_NAME,
    STATUS_ERROR,
    STATUS_OK,
    STATUS_SKIPPED,
    SUMMARY_NAME,
    latest_records,
    read_results,
)


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def summarize_records(records: list[dict[str, Any]], run: dict[str, Any] | None = None) -> dict[str, Any]:
    """The summary of a run from its results records (last word per row, see `latest_records`)."""
    final = list(latest_records(records).values())
    final.sort(key=lambda r: (r["file"], int(r["row"])))
    scored = [r for r in final if r.get("status") == STATUS_OK]
    errors = [r for r in final if r.get("status") == STATUS_ERROR]
    skipped = [r for r in final if r.get("status") == STATUS_SKIPPED]

    cells: dict[tuple[str, int], list[dict]] = defaultdict(list)
    by_needles: dict[int, list[float]] = defaultdict(list)
    for record in scored:
        cells[(record["bin"], int(record["n_needles"]))].append(record)
        by_needles[int(record["n_needles"])].append(record["score"])
    cell_rows = []
    for (bin_label, n_needles), members in sorted(cells.items(), key=lambda kv: (bin_sort_key(kv[0][0]), kv[0][1])):
        cell_rows.append(
            {
                "bin": bin_label,
                "bin_upper": bin_upper(bin_label),
                "n_needles": n_needles,
                "count": len(members),
                "mean_score": _mean([m["score"] for m in members]),
                "mean_score_lenient": _mean([m["score_lenient"] for m in members if m.get("score_lenient") is not None]),
                "floor_random_needle": _mean(
                    [m["floor_random_needle"] for m in members if m.get("floor_random_needle") is not None]
                ),
                "floor_random_writing": _mean(
                    [m["floor_random_writing"] for m in members if m.get("floor_random_writing") is not None]
                ),
            }
        )
    latencies = [r["latency_s"] for r in scored if r.get("latency_s") is not None]
    usage_prompt = [r.get("usage", {}).get("prompt_tokens") for r in scored]
    usage_completion = [r.get("usage", {}).get("completion_tokens") for r in scored]
    run = run or {}
    v2_scored = [r for r in scored if r.get("recipe") == "mrcr-v2"]
    extra = {}
    if v2_scored:
        from ..v2._eval import v2_report

        extra["mrcr_v2"] = v2_report(v2_scored)
    return extra | {
        "model": run.get("model"),
        "base_url": run.get("base_url"),
        "data": run.get("data"),
        "mean_score": _mean([r["score"] for r in scored]),
        "mean_score_lenient": _mean([r["score_lenient"] for r in scored if r.get("score_lenient") is not None]),
        "n_scored": len(scored),
        "cells": cell_rows,
        "by_needles": [
            {"n_needles": n, "count": len(scores), "mean_score": _mean(scores)} for n, scores in sorted(by_needles.items())
        ],
        "skipped": {
            "count": len(skipped),
            "max_context_window": run.get("max_context_window"),
            "rows": [{"file": r["file"], "row": r["row"], "o200k_prompt_tokens": r.get("o200k_prompt_tokens")} for r in skipped],
        },
        "errors": {
            "count": len(errors),
            "rows": [{"file": r["file"], "row": r["row"], "error": r.get("error")} for r in errors],
        },
        "usage": {
            "prompt_tokens": sum(v for v in usage_prompt if isinstance(v, int)),
            "completion_tokens": sum(v for v in usage_completion if isinstance(v, int)),
        },
        "latency_s": {
            "mean": _mean(latencies),
            "median": statistics.median(latencies) if latencies else None,
            "max": max(latencies) if latencies else None,
        },
    }


def summarize(run_dir: str | os.PathLike) -> dict[str, Any]:
    """The summary of RUN_DIR (results.jsonl and run.json), without writing anything."""
    run_dir = Path(run_dir)
    results = run_dir / RESULTS_NAME
    if not results.exists():
        raise FileNotFoundError(f"{results} not found: is {run_dir} a mrcr-eval run directory?")
    run_file = run_dir / RUN_NAME
    try:
        run = json.loads(run_file.read_text(encoding="utf-8")) if run_file.exists() else {}
    except ValueError:
        raise ValueError(f"{run_file} is not valid JSON") from None
    return summarize_records(read_results(results), run)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def render_table(summary: dict[str, Any], title: str | None = None) -> Table:
    """A rich table: one line per bin x needles, with the reference floors."""
    table = Table(title=title or f"MRCR - {summary.get('model') or 'model'}")
    table.add_column("bin")
    table.add_column("needles", justify="right")
    table.add_column("rows", justify="right")
    table.add_column("mean score", justify="right")
    table.add_column("needle floor", justify="right")
    table.add_column("writing floor", justify="right")
    for cell in summary["cells"]:
        table.add_row(
            cell["bin"],
            str(cell["n_needles"]),
            str(cell["count"]),
            _fmt(cell["mean_score"]),
            _fmt(cell.get("floor_random_needle")),
            _fmt(cell.get("floor_random_writing")),
        )
    table.caption = (
        f"mean score {_fmt(summary['mean_score'])} over {summary['n_scored']} rows; "
        f"skipped {summary['skipped']['count']}; errors {summary['errors']['count']}\n"
        "floors: the score of answering the prefix plus a random needle of the right ask / "
        "plus a random writing (no model calls)"
    )
    return table


def _short_bin(label: str) -> str:
    upper = bin_upper(label)
    if upper is None:
        return label
    return f"{upper // 1048576}M" if upper >= 1048576 else f"{upper // 1024}k"


def plot_summary(summary: dict[str, Any], path: str | os.PathLike) -> None:
    """Mean score against context bin, one line per needle count (dotted: random-needle floor)."""
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
            floors = [(x, c["floor_random_needle"]) for x, c in zip(xs, cells) if c.get("floor_random_needle") is not None]
            if floors:
                axes.plot(
                    [x for x, _ in floors],
                    [y for _, y in floors],
                    linestyle=":",
                    color=color,
                    alpha=0.6,
                    label=f"{n_needles} needles: random-needle floor",
                )
        axes.set_xticks(range(len(bins)))
        axes.set_xticklabels([_short_bin(b) for b in bins])
        axes.set_xlabel("context length bin (o200k tokens, upper edge)")
        axes.set_ylabel("mean score (official grader)")
        axes.set_ylim(0, 1.02)
        axes.grid(True, alpha=0.3)
        axes.set_title(f"MRCR - {summary.get('model') or 'model'}")
        if summary["cells"]:
            axes.legend(fontsize="small")
        figure.tight_layout()
        with atomic_path(path) as tmp:
            figure.savefig(tmp, format="png")
    finally:
        plt.close(figure)


def write_report(run_dir: str | os.PathLike) -> dict[str, Any]:
    """Write RUN_DIR/summary.json and RUN_DIR/plot.png; return the summary."""
    run_dir = Path(run_dir)
    summary = summarize(run_dir)
    write_text_atomic(run_dir / SUMMARY_NAME, json.dumps(summary, indent=2) + "\n")
    plot_summary(summary, run_dir / PLOT_NAME)
    return summary


def print_report(summary: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console()
    console.print(render_table(summary))
    if summary.get("mrcr_v2"):
        from ..v2._eval import render_v2_table

        console.print(render_v2_table(summary["mrcr_v2"]))
