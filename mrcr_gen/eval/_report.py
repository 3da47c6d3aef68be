"""Reports of a run: RUN_DIR/summary.json, a rich table and RUN_DIR/plot.png."""

from __future__ import annotations

import json
import os
import statistics
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from .._bins import bin_headers, bin_sort_key, bin_upper
from .._files import save_figure, write_text_atomic
from .._prices import cache_aware_cost
from ._auc import auc_fields
from ._control import control_pairs, memorization_test
from ._failures import failure_summary, write_failure_plots
from ._items import EvalRecipe
from ._results import (
    PLOT_NAME,
    RESULTS_NAME,
    RUN_NAME,
    STATUS_ERROR,
    STATUS_OK,
    STATUS_SKIPPED,
    SUMMARY_NAME,
    latest_file_errors,
    latest_records,
    read_results,
    selected_keys,
)


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def mean_of(records: list[dict[str, Any]], key: str) -> float | None:
    """The mean of `key` over the records where it is set; None where no record has it."""
    return _mean([r[key] for r in records if r.get(key) is not None])


def _score(record: dict[str, Any]) -> float:
    """A row's contribution to a mean: its grade, or 0 for an error or a skipped row (never left out)."""
    return float(record["score"]) if record.get("status") == STATUS_OK else 0.0


def _bin_upper_of(record: dict[str, Any]) -> int | None:
    return record.get("bin_upper") or bin_upper(record.get("bin", ""))


def _is_current(record: dict[str, Any], run: dict[str, Any]) -> bool:
    """Whether a record belongs to the data and settings the run directory now holds: a row of
    a rewritten file counts only once it has a result for its current content."""
    shas = {entry["path"]: entry["sha256"] for entry in run.get("data") or [] if isinstance(entry, dict)}
    if shas and record.get("data_sha256") != shas.get(record["file"]):
        return False
    fingerprint = run.get("fingerprint")
    return not (fingerprint and record.get("settings") != fingerprint)


class _Selection:
    """The rows and files the run folder's last command selected (run.json `selection`): its summary
    describes them only; the folder's other results stay there for reuse. A run.json without a
    selection (older mrcr-eval) selects everything; one killed before it ended, every row of its files."""

    def __init__(self, selection: Any):
        selection = selection if isinstance(selection, dict) else {}
        files = selection.get("files")
        self.files = set(files) if isinstance(files, list) else None
        self.keys = selected_keys(selection)
        unreadable = selection.get("unreadable")
        self.failed_files = set(unreadable) if isinstance(unreadable, list) else self.files

    def file(self, entry: Any) -> bool:
        return self.files is None or not isinstance(entry, dict) or entry.get("path") in self.files

    def row(self, record: dict[str, Any]) -> bool:
        if self.keys is not None:
            return (record["file"], record["row"]) in self.keys
        return self.files is None or record["file"] in self.files

    def unreadable(self, record: dict[str, Any]) -> bool:
        return self.failed_files is None or record["file"] in self.failed_files


def _selected(run: dict[str, Any]) -> _Selection:
    return _Selection(run.get("selection"))


def _group_stats(
    members: list[dict[str, Any]], skipped: list[dict[str, Any]], max_context_window: int | None
) -> dict[str, Any]:
    """count, errors, skipped, mean_score (errors as 0, skipped rows not scored, as the official
    loop), mean_score_answered and the AUC fields of some rows (whose bin means count errors and
    skipped rows as 0)."""
    answered = [m for m in members if m.get("status") == STATUS_OK]
    by_bin: dict[int, list[float]] = defaultdict(list)
    for member in members + skipped:
        upper = _bin_upper_of(member)
        if upper is not None:
            by_bin[upper].append(_score(member))
    bin_means = {upper: _mean(scores) for upper, scores in by_bin.items()}
    return {
        "count": len(members),
        "errors": len(members) - len(answered),
        "skipped": len(skipped),
        "mean_score": _mean([_score(m) for m in members]),
        "mean_score_answered": _mean([m["score"] for m in answered]),
        **auc_fields(bin_means, max_context_window),
    }


def run_rows(records: list[dict[str, Any]], run: dict[str, Any]) -> list[dict[str, Any]]:
    """The records a run's summary describes: the latest current record of each row the last
    command selected, by file and row."""
    selected = _selected(run)
    final = [r for r in latest_records(records).values() if _is_current(r, run) and selected.row(r)]
    final.sort(key=lambda r: (r["file"], int(r["row"])))
    return final


def summarize_records(
    records: list[dict[str, Any]], run: dict[str, Any] | None = None, *, recipes: Sequence[EvalRecipe] = ()
) -> dict[str, Any]:
    """The summary of a run from its results records (the latest current record per row).

    Two rules, each the one its number is compared with. `mean_score` is the official loop's: it
    counts every row that was sent or meant to be (an error counts as 0, so the headline never
    exceeds what the official loop would report), and a row skipped for not fitting the context
    window is not scored; `mean_score_answered` also leaves errors out. Every per-bin number
    (`cells`, `bins`, `mean_128k`, `mean_1m`, the AUCs, the plot) is over every row of the bin:
    errors and skipped rows count 0, so a model is never credited for rows it could not take.
    `complete` is true only when the last run finished and nothing failed. Each of `recipes` adds
    its own entries (`EvalRecipe.report_extras`) from its rows.
    """
    run = run or {}
    selected = _selected(run)
    final = run_rows(records, run)
    file_errors = [r for r in latest_file_errors(records).values() if _is_current(r, run) and selected.unreadable(r)]
    scored = [r for r in final if r.get("status") == STATUS_OK]
    errors = [r for r in final if r.get("status") == STATUS_ERROR]
    skipped = [r for r in final if r.get("status") == STATUS_SKIPPED]
    counted = scored + errors
    window = run.get("max_context_window")

    # Bin means: every row of the bin, errors and skipped rows as 0.
    cells: dict[tuple[str, int], list[dict]] = defaultdict(list)
    by_bin: dict[str, list[dict]] = defaultdict(list)
    for record in counted + skipped:
        cells[(record["bin"], int(record["n_needles"]))].append(record)
        by_bin[record["bin"]].append(record)
    by_needles: dict[int, tuple[list[dict], list[dict]]] = defaultdict(lambda: ([], []))
    for record in counted:
        by_needles[int(record["n_needles"])][0].append(record)
    for record in skipped:
        by_needles[int(record["n_needles"])][1].append(record)
    cell_rows = []
    for (label, n_needles), members in sorted(cells.items(), key=lambda kv: (bin_sort_key(kv[0][0]), kv[0][1])):
        answered = [m for m in members if m.get("status") == STATUS_OK]
        not_sent = sum(1 for m in members if m.get("status") == STATUS_SKIPPED)
        cell_rows.append(
            {
                "bin": label,
                "bin_upper": bin_upper(label),
                "n_needles": n_needles,
                "count": len(members),
                "errors": len(members) - len(answered) - not_sent,
                "skipped": not_sent,
                "mean_score": _mean([_score(m) for m in members]),
                "mean_score_answered": _mean([m["score"] for m in answered]),
                "mean_score_lenient": mean_of(answered, "score_lenient"),
                "floor_random_needle": mean_of(members, "floor_random_needle"),
                "floor_random_writing": mean_of(members, "floor_random_writing"),
            }
        )
    latencies = [r["latency_s"] for r in scored if r.get("latency_s") is not None]

    def usage_total(name: str) -> int:
        return sum(v for v in (r.get("usage", {}).get(name) for r in scored) if isinstance(v, int))

    usage = {
        name: usage_total(name) for name in ("prompt_tokens", "completion_tokens", "reasoning_tokens", "cached_tokens")
    }
    price = run.get("price_per_1m")
    settings = run.get("settings") or {}
    strip_think = bool(settings.get("strip_think"))
    control = settings.get("control")
    overall = _group_stats(counted, skipped, window)
    extra: dict[str, Any] = {}
    for recipe in recipes:
        own = [
            r if r.get("status") == STATUS_OK else r | {"score": 0.0}
            for r in counted + skipped
            if r.get("recipe") == recipe.name
        ]
        if own:
            extra |= recipe.report_extras(own, window)
    return extra | {
        "model": run.get("model"),
        "base_url": run.get("base_url"),
        "data": [e for e in run["data"] if selected.file(e)] if isinstance(run.get("data"), list) else run.get("data"),
        "settings": settings or None,
        "official": not strip_think and not control,
        "scoring": f"NOT A SCORE: a {control} control (each row's final query sent without its conversation)"
        if control
        else "NOT OFFICIAL: replies graded with <think> blocks removed (--strip-think)"
        if strip_think
        else "official: every HTTP-200 reply graded as returned; errors count as 0",
        "control": control,
        # A control scoring above the random-writing floor means the model has seen the rows (see _control).
        "memorization": memorization_test(control_pairs(scored)) if control else None,
        "complete": bool(run.get("finished", True)) and not errors and not file_errors,
        "mean_score": overall["mean_score"],
        "mean_score_answered": overall["mean_score_answered"],
        "mean_score_lenient": _mean([r["score_lenient"] for r in scored if r.get("score_lenient") is not None]),
        "auc_128k": overall["auc_128k"],
        "auc_1m": overall["auc_1m"],
        "mean_128k": overall["mean_128k"],
        "mean_1m": overall["mean_1m"],
        "n_rows": len(counted),
        "n_scored": len(scored),
        "cells": cell_rows,
        "bins": [
            {
                "bin": label,
                "bin_upper": bin_upper(label),
                "count": len(members),
                "skipped": sum(1 for m in members if m.get("status") == STATUS_SKIPPED),
                "mean_score": _mean([_score(m) for m in members]),
            }
            for label, members in sorted(by_bin.items(), key=lambda kv: bin_sort_key(kv[0]))
        ],
        "by_needles": [
            {"n_needles": n, **_group_stats(members, not_sent, window)}
            for n, (members, not_sent) in sorted(by_needles.items())
        ],
        "replies": {
            "finish_reasons": dict(Counter(str(r.get("finish_reason")) for r in scored)),
            "empty": sum(1 for r in scored if not r.get("response")),
            "null_content": sum(1 for r in scored if r.get("content_null")),
            "with_think_tag": sum(1 for r in scored if r.get("think")),
            "with_reasoning_content": sum(1 for r in scored if r.get("reasoning_chars")),
        },
        "skipped": {
            "count": len(skipped),
            "max_context_window": window,
            "rows": [
                {"file": r["file"], "row": r["row"], "o200k_prompt_tokens": r.get("o200k_prompt_tokens")}
                for r in skipped
            ],
        },
        "errors": {
            "count": len(errors),
            "by_check": dict(Counter(str(r.get("check", "request")) for r in errors)),
            "rows": [
                {"file": r["file"], "row": r["row"], "check": r.get("check", "request"), "error": r.get("error")}
                for r in errors
            ],
        },
        "file_errors": [{"file": r["file"], "error": r.get("error")} for r in file_errors],
        "failures": failure_summary(counted),
        "usage": usage,
        "price_per_1m": price,
        **_costs(price, usage),
        "latency_s": {
            "mean": _mean(latencies),
            "median": statistics.median(latencies) if latencies else None,
            "max": max(latencies) if latencies else None,
        },
    }


def _costs(price: Any, usage: dict[str, int]) -> Mapping[str, float | None]:
    """`cost_usd` (cached prompt tokens at the cached price), `cost_without_cache_usd` and
    `cache_saved_usd`; None each when the model's price is not known."""
    if not isinstance(price, dict):
        return {"cost_usd": None, "cost_without_cache_usd": None, "cache_saved_usd": None}
    return cache_aware_cost(price, usage["prompt_tokens"], usage["cached_tokens"], usage["completion_tokens"])


def read_run_dir(run_dir: str | os.PathLike) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(results records, run.json) of RUN_DIR; FileNotFoundError without results.jsonl, ValueError
    (naming the file) for a run.json that is not JSON or results of no readable record."""
    run_dir = Path(run_dir)
    results = run_dir / RESULTS_NAME
    if not results.exists():
        raise FileNotFoundError(f"{results} not found: is {run_dir} a mrcr-eval run directory?")
    run_file = run_dir / RUN_NAME
    try:
        run = json.loads(run_file.read_text(encoding="utf-8")) if run_file.exists() else {}
    except ValueError:
        raise ValueError(f"{run_file} is not valid JSON") from None
    records = read_results(results)
    if not records and results.stat().st_size > 0:
        raise ValueError(
            f"{results} holds no result records this mrcr-eval can read (another version or another file?)"
        )
    return records, run


def summarize(run_dir: str | os.PathLike, *, recipes: Sequence[EvalRecipe]) -> dict[str, Any]:
    """The summary of RUN_DIR (results.jsonl and run.json), without writing anything."""
    records, run = read_run_dir(run_dir)
    return summarize_records(records, run, recipes=recipes)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def render_table(summary: dict[str, Any], title: str | None = None) -> Table:
    """A rich table: one line per bin x needles, with the reference floors."""
    table = Table(title=title or f"MRCR - {summary.get('model') or 'model'}")
    table.add_column("bin")
    table.add_column("needles", justify="right")
    table.add_column("rows", justify="right")
    table.add_column("errors", justify="right")
    table.add_column("mean score", justify="right")
    table.add_column("needle floor", justify="right")
    table.add_column("writing floor", justify="right")
    for cell in summary["cells"]:
        table.add_row(
            cell["bin"],
            str(cell["n_needles"]),
            str(cell["count"]),
            str(cell.get("errors", 0)),
            _fmt(cell["mean_score"]),
            _fmt(cell.get("floor_random_needle")),
            _fmt(cell.get("floor_random_writing")),
        )
    cost, saved = summary.get("cost_usd"), summary.get("cache_saved_usd")
    table.caption = (
        f"mean score {_fmt(summary['mean_score'])} over {summary['n_rows']} rows "
        f"(errors count 0; {_fmt(summary['mean_score_answered'])} over the {summary['n_scored']} answered); "
        f"AUC@128k {_fmt(summary.get('auc_128k'))}, AUC@1M {_fmt(summary.get('auc_1m'))}; "
        f"skipped {summary['skipped']['count']} (not in the mean; in the bins' rows and means as 0); "
        f"errors {summary['errors']['count']}"
        f"{'' if cost is None else f'; cost ${cost:,.4f}'}"
        f"{f' (prompt caching saved ${saved:,.4f})' if saved else ''}"
        f"{'' if summary.get('complete', True) else '; INCOMPLETE'}"
        f"{_not_official(summary)}\n"
        "floors: the score of answering the prefix plus a random needle of the right ask / "
        "plus a random writing (no model calls)"
    )
    return table


def _not_official(summary: dict[str, Any]) -> str:
    if summary.get("official", True):
        return ""
    control = summary.get("control")
    if not control:
        return "; NOT OFFICIAL (--strip-think)"
    test = summary.get("memorization") or {}
    verdict = (
        "too few rows to test"
        if test.get("p_value") is None
        else f"{'MEMORIZED' if test['memorized'] else 'not above'}: {_fmt(test['control_mean'])} against the "
        f"random-writing floor {_fmt(test['floor_mean'])}, one-sided paired t-test p={test['p_value']:.2g}"
    )
    return f"; NOT A SCORE: --control {control} ({verdict})"


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
            floors = [
                (x, c["floor_random_needle"])
                for x, c in zip(xs, cells, strict=True)
                if c.get("floor_random_needle") is not None
            ]
            if floors:
                axes.plot(
                    [x for x, _ in floors],
                    [y for _, y in floors],
                    linestyle=":",
                    color=color,
                    alpha=0.6,
                    label=f"{n_needles} needles: random-needle floor",
                )
        finish_bin_plot(figure, axes, bins, f"MRCR - {summary.get('model') or 'model'}", bool(summary["cells"]), path)
    finally:
        plt.close(figure)


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


def write_report(run_dir: str | os.PathLike, *, recipes: Sequence[EvalRecipe]) -> dict[str, Any]:
    """Write RUN_DIR/summary.json, RUN_DIR/plot.png and the failure plots beside it
    (`_failures.write_failure_plots`); return the summary."""
    run_dir = Path(run_dir)
    summary = summarize(run_dir, recipes=recipes)
    write_text_atomic(run_dir / SUMMARY_NAME, json.dumps(summary, indent=2) + "\n")
    plot_summary(summary, run_dir / PLOT_NAME)
    write_failure_plots(summary["failures"], run_dir, f"MRCR - {summary.get('model') or 'model'}")
    return summary


def print_report(
    summary: dict[str, Any], console: Console | None = None, *, recipes: Sequence[EvalRecipe] = ()
) -> None:
    """The summary's table, then each recipe's own tables (`EvalRecipe.report_tables`)."""
    console = console or Console()
    console.print(render_table(summary))
    for recipe in recipes:
        for table in recipe.report_tables(summary):
            console.print(table)
