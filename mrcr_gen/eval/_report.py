"""Reports of a run: RUN_DIR/summary.json, a rich table and RUN_DIR/plot.png."""

from __future__ import annotations

import json
import os
import statistics
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from .._bins import bin_headers, bin_sort_key, bin_upper
from .._files import write_text_atomic
from .._usage import cost, ledger_usage
from ._auc import auc_fields
from ._ci import bootstrap, format_interval
from ._control import control_test
from ._failures import OUTCOMES, failure_summary, prefix_kept, target_share
from ._floors import Floor, control_floors, declared_floors
from ._items import EvalRecipe
from ._plots import write_plots
from ._results import (
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


@dataclass
class _Rows:
    """The records a summary describes, by what became of them."""

    scored: list[dict[str, Any]]  # graded
    errors: list[dict[str, Any]]  # meant to be scored, failed: count 0
    skipped: list[dict[str, Any]]  # over the context window: not sent, not in `mean_score`
    file_errors: list[dict[str, Any]]  # files that could not be read

    @property
    def counted(self) -> list[dict[str, Any]]:
        return self.scored + self.errors


def _rows(records: list[dict[str, Any]], run: dict[str, Any]) -> _Rows:
    selected = _selected(run)
    final = run_rows(records, run)
    file_errors = [r for r in latest_file_errors(records).values() if _is_current(r, run) and selected.unreadable(r)]
    return _Rows(
        scored=[r for r in final if r.get("status") == STATUS_OK],
        errors=[r for r in final if r.get("status") == STATUS_ERROR],
        skipped=[r for r in final if r.get("status") == STATUS_SKIPPED],
        file_errors=file_errors,
    )


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
    `complete` is true only when the last run finished and nothing failed. The cells hold the
    floors `recipes` declare (`_floors`); each of them adds its own entries
    (`EvalRecipe.report_extras`) from its rows.
    """
    run = run or {}
    rows = _rows(records, run)
    window = run.get("max_context_window")
    overall = _group_stats(rows.counted, rows.skipped, window)
    return (
        _recipe_extras(recipes, rows, window)
        | _run_fields(run, rows, recipes)
        | {
            "mean_score": overall["mean_score"],
            "mean_score_answered": overall["mean_score_answered"],
            "mean_score_lenient": mean_of(rows.scored, "score_lenient"),
            "auc_128k": overall["auc_128k"],
            "auc_1m": overall["auc_1m"],
            "mean_128k": overall["mean_128k"],
            "mean_1m": overall["mean_1m"],
            "n_rows": len(rows.counted),
            "n_scored": len(rows.scored),
            "cells": _cells(rows, declared_floors(recipes)),
            "bins": _bins(rows),
            "by_needles": _by_needles(rows, window),
            "replies": _replies(rows.scored),
            "skipped": _skipped(rows.skipped, window),
            "errors": _errors(rows.errors),
            "file_errors": [{"file": r["file"], "error": r.get("error")} for r in rows.file_errors],
            "failures": failure_summary(rows.counted + rows.skipped),
            "ci": _intervals(rows, window),
        }
        | _spending(rows.scored, run.get("price_per_1m"), shared=bool((run.get("settings") or {}).get("batch")))
    )


def _intervals(rows: _Rows, window: int | None) -> dict[str, Any]:
    """Bootstrap 95% intervals of the headline mean, the bins' means and the AUCs (`_ci`)."""
    counted = [(r, True) for r in rows.counted] + [(r, False) for r in rows.skipped]
    return bootstrap(
        [(r["bin"], _bin_upper_of(r), int(r.get("n_needles") or 0), _score(r), flag) for r, flag in counted], window
    )


def counted_scores(records: list[dict[str, Any]], run: dict[str, Any]) -> dict[tuple[Any, ...], tuple[str, int, float]]:
    """Each row `mean_score` counts (errors as 0), keyed by its content digest and row index (so
    two runs of the same rows pair up wherever their files lie): (bin, needle count, score)."""
    return {
        (r.get("digest") or r["file"], int(r["row"])): (r["bin"], int(r.get("n_needles") or 0), _score(r))
        for r in _rows(records, run).counted
    }


def _recipe_extras(recipes: Sequence[EvalRecipe], rows: _Rows, window: int | None) -> dict[str, Any]:
    """Each recipe's own entries from its rows, errors and skipped rows scored 0."""
    extra: dict[str, Any] = {}
    for recipe in recipes:
        own = [
            r if r.get("status") == STATUS_OK else r | {"score": 0.0}
            for r in rows.counted + rows.skipped
            if r.get("recipe") == recipe.name
        ]
        if own:
            extra |= recipe.report_extras(own, window)
    return extra


def _run_fields(run: dict[str, Any], rows: _Rows, recipes: Sequence[EvalRecipe]) -> dict[str, Any]:
    """What the run was: model, data, settings, whether its numbers are official scores, the
    memorization test of a control and whether it is complete."""
    selected = _selected(run)
    settings = run.get("settings") or {}
    strip_think = bool(settings.get("strip_think"))
    control = settings.get("control")
    data = run.get("data")
    return {
        "model": run.get("model"),
        "base_url": run.get("base_url"),
        "data": [e for e in data if selected.file(e)] if isinstance(data, list) else data,
        "settings": settings or None,
        "official": not strip_think and not control,
        "scoring": f"NOT A SCORE: a {control} control (each row's final query sent without its conversation)"
        if control
        else "NOT OFFICIAL: replies graded with <think> blocks removed (--strip-think)"
        if strip_think
        else "official: every HTTP-200 reply graded as returned; errors count as 0",
        "control": control,
        # A control scoring above its declared floor means the model has seen the rows (see _control).
        "memorization": control_test(rows.scored, recipes) if control else None,
        "complete": bool(run.get("finished", True)) and not rows.errors and not rows.file_errors,
        # Rows of the selection still in a Batch API batch (`--batch --no-wait`): not in n_rows yet.
        "pending": run.get("pending"),
    }


def _cells(rows: _Rows, floors: Sequence[Floor]) -> list[dict[str, Any]]:
    """Per bin x needle count: every row of the cell, errors and skipped rows as 0, with the mean
    of each declared floor."""
    cells: dict[tuple[str, int], list[dict]] = defaultdict(list)
    for record in rows.counted + rows.skipped:
        cells[(record["bin"], int(record["n_needles"]))].append(record)
    out = []
    for (label, n_needles), members in sorted(cells.items(), key=lambda kv: (bin_sort_key(kv[0][0]), kv[0][1])):
        answered = [m for m in members if m.get("status") == STATUS_OK]
        not_sent = sum(1 for m in members if m.get("status") == STATUS_SKIPPED)
        out.append(
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
            }
            | {floor.name: mean_of(members, floor.name) for floor in floors}
        )
    return out


def _bins(rows: _Rows) -> list[dict[str, Any]]:
    by_bin: dict[str, list[dict]] = defaultdict(list)
    for record in rows.counted + rows.skipped:
        by_bin[record["bin"]].append(record)
    return [
        {
            "bin": label,
            "bin_upper": bin_upper(label),
            "count": len(members),
            "skipped": sum(1 for m in members if m.get("status") == STATUS_SKIPPED),
            "mean_score": _mean([_score(m) for m in members]),
        }
        for label, members in sorted(by_bin.items(), key=lambda kv: bin_sort_key(kv[0]))
    ]


def _by_needles(rows: _Rows, window: int | None) -> list[dict[str, Any]]:
    groups: dict[int, tuple[list[dict], list[dict]]] = defaultdict(lambda: ([], []))
    for record in rows.counted:
        groups[int(record["n_needles"])][0].append(record)
    for record in rows.skipped:
        groups[int(record["n_needles"])][1].append(record)
    return [
        {"n_needles": n, **_group_stats(members, not_sent, window)} for n, (members, not_sent) in sorted(groups.items())
    ]


def _replies(scored: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "finish_reasons": dict(Counter(str(r.get("finish_reason")) for r in scored)),
        "empty": sum(1 for r in scored if not r.get("response")),
        "null_content": sum(1 for r in scored if r.get("content_null")),
        "with_think_tag": sum(1 for r in scored if r.get("think")),
        "with_reasoning_content": sum(1 for r in scored if r.get("reasoning_chars")),
    }


def _skipped(skipped: list[dict[str, Any]], window: int | None) -> dict[str, Any]:
    return {
        "count": len(skipped),
        "max_context_window": window,
        "rows": [
            {"file": r["file"], "row": r["row"], "o200k_prompt_tokens": r.get("o200k_prompt_tokens")} for r in skipped
        ],
    }


def _errors(errors: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "count": len(errors),
        "by_check": dict(Counter(str(r.get("check", "request")) for r in errors)),
        "rows": [
            {"file": r["file"], "row": r["row"], "check": r.get("check", "request"), "error": r.get("error")}
            for r in errors
        ],
    }


def _spending(scored: list[dict[str, Any]], price: Any, *, shared: bool) -> dict[str, Any]:
    """Tokens used, their cost, and the replies' latencies. With `shared` (a batch run: rows of
    identical content are one request), a reply several rows share is counted once."""
    usage = ledger_usage(scored, shared=shared)
    latencies = [r["latency_s"] for r in scored if r.get("latency_s") is not None]
    return {
        "usage": usage.as_record(),
        "price_per_1m": price,
        **(cost(price, usage) if isinstance(price, dict) else dict.fromkeys(_COSTS)),
        "latency_s": {
            "mean": _mean(latencies),
            "median": statistics.median(latencies) if latencies else None,
            "max": max(latencies) if latencies else None,
        },
    }


#: The cost fields of a summary (None each when the model's price is not known).
_COSTS = ("cost_usd", "cost_without_cache_usd", "cache_saved_usd")


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


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def _with_ci(value: float | None, interval: list[float] | None) -> str:
    """A number with its 95% interval: "0.293 [0.250, 0.331]"."""
    return f"{_fmt(value)} {format_interval(interval, _fmt)}".rstrip()


SHORT_OUTCOMES = ("other", "distr", "no ctx", "empty", "error", "skip")  # OUTCOMES[1:], short


def outcome_table(summary: dict[str, Any]) -> Table:
    """Per bin x needle count: what the replies returned, the target split by whether its prefix
    was kept (a right writing without its prefix scores 0), and the share of replies that kept it."""
    table = Table(title="What the replies returned (share of rows)")
    table.add_column("bin")
    headers = ("n", "rows", "prefix", "tgt+pfx", "tgt-pfx", *SHORT_OUTCOMES)
    for column in headers:
        table.add_column(column, justify="right")
    table.caption = (
        "n: needles; prefix: replies that start with their prefix; tgt+pfx: the target with its prefix; "
        "tgt-pfx: the target without it (scores 0); other: another needle; distr: a distractor; "
        "no ctx: text not in the conversation"
    )
    cells = (summary.get("failures") or {}).get("outcomes", [])
    for cell, header in zip(cells, bin_headers([c["bin"] for c in cells]), strict=True):
        table.add_row(
            header,
            str(cell["n_needles"]),
            str(cell["count"]),
            _pct(prefix_kept([cell])),
            _pct(target_share([cell], "ok")),
            _pct((target_share([cell]) or 0.0) - (target_share([cell], "ok") or 0.0)),
            *(_pct(cell["shares"].get(outcome)) for outcome in OUTCOMES[1:]),
        )
    return table


def render_table(summary: dict[str, Any], title: str | None = None, *, floors: Sequence[Floor] = ()) -> Table:
    """A rich table: one line per bin x needles, with the reference `floors` (as recipes declare them)."""
    table = Table(title=title or f"MRCR - {summary.get('model') or 'model'}")
    table.add_column("bin")
    for column in ("needles", "rows", "errors", "mean score", *(floor.label for floor in floors)):
        table.add_column(column, justify="right")
    for cell in summary["cells"]:
        table.add_row(
            cell["bin"],
            str(cell["n_needles"]),
            str(cell["count"]),
            str(cell.get("errors", 0)),
            _fmt(cell["mean_score"]),
            *(_fmt(cell.get(floor.name)) for floor in floors),
        )
    cost, saved = summary.get("cost_usd"), summary.get("cache_saved_usd")
    ci = summary.get("ci") or {}
    table.caption = (
        f"mean score {_with_ci(summary['mean_score'], ci.get('mean_score'))} over {summary['n_rows']} rows "
        f"(errors count 0; {_fmt(summary['mean_score_answered'])} over the {summary['n_scored']} answered); "
        f"AUC@128k {_with_ci(summary.get('auc_128k'), ci.get('auc_128k'))}, "
        f"AUC@1M {_with_ci(summary.get('auc_1m'), ci.get('auc_1m'))}"
        f"{' (in brackets: bootstrap 95% intervals)' if ci else ''}; "
        f"skipped {summary['skipped']['count']} (not in the mean; in the bins' rows and means as 0); "
        f"errors {summary['errors']['count']}"
        f"{'' if cost is None else f'; cost ${cost:,.4f}'}"
        f"{f' (prompt caching saved ${saved:,.4f})' if saved else ''}"
        f"{'' if summary.get('complete', True) else '; INCOMPLETE'}"
        f"{_pending_note(summary.get('pending'))}"
        f"{_not_official(summary, floors)}"
        f"{_bins_note(summary)}"
        f"{_floors_note(floors)}"
    )
    return table


def _pending_note(pending: Any) -> str:
    if not pending:
        return ""
    bins = ", ".join(f"{label} {count}" for label, count in pending.get("by_bin", {}).items())
    return f"; {pending['rows']} rows still in {pending['batches']} running batches ({bins}): not counted yet"


def _bins_note(summary: dict[str, Any]) -> str:
    """Each bin's mean (errors and skipped rows as 0) with its 95% interval."""
    intervals = (summary.get("ci") or {}).get("bins") or {}
    parts = [f"{b['bin']} {_with_ci(b['mean_score'], intervals.get(b['bin']))}" for b in summary.get("bins", [])]
    return f"\nbin means: {'; '.join(parts)}" if parts else ""


def _floors_note(floors: Sequence[Floor]) -> str:
    if not floors:
        return ""
    guesses = " / plus ".join(floor.guess for floor in floors)
    return f"\nfloors: the score of answering the prefix plus {guesses} (no model calls)"


def _not_official(summary: dict[str, Any], floors: Sequence[Floor]) -> str:
    if summary.get("official", True):
        return ""
    control = summary.get("control")
    if not control:
        return "; NOT OFFICIAL (--strip-think)"
    test = summary.get("memorization") or {}
    floor = " / ".join(floor.title for floor in control_floors(floors)) or "floor"
    verdict = (
        "too few rows to test"
        if test.get("p_value") is None
        else f"{'MEMORIZED' if test['memorized'] else 'not above'}: {_fmt(test['control_mean'])} against the "
        f"{floor} {_fmt(test['floor_mean'])}, one-sided paired t-test p={test['p_value']:.2g}"
    )
    note = f"; {test['note']}" if test.get("note") else ""
    return f"; NOT A SCORE: --control {control} ({verdict}{note})"


def write_report(run_dir: str | os.PathLike, *, recipes: Sequence[EvalRecipe]) -> dict[str, Any]:
    """Write RUN_DIR/summary.json, RUN_DIR/plot.png and the failure plots beside it
    (`_plots.write_plots`); return the summary."""
    run_dir = Path(run_dir)
    summary = summarize(run_dir, recipes=recipes)
    write_text_atomic(run_dir / SUMMARY_NAME, json.dumps(summary, indent=2) + "\n")
    write_plots(summary, run_dir, declared_floors(recipes))
    return summary


def print_report(
    summary: dict[str, Any], console: Console | None = None, *, recipes: Sequence[EvalRecipe] = ()
) -> None:
    """The summary's table, then each recipe's own tables (`EvalRecipe.report_tables`)."""
    console = console or Console()
    console.print(render_table(summary, floors=declared_floors(recipes)))
    if (summary.get("failures") or {}).get("outcomes"):
        console.print(outcome_table(summary))
    for recipe in recipes:
        for table in recipe.report_tables(summary):
            console.print(table)
