"""Runs and graded replies as the HTML report (`mrcr-eval view`, `compare --html`, `mrcr-grade
--html`), and the failure analysis added to the rows of runs made before it existed
(`mrcr-eval report`).

Results hold the reply but neither the conversation nor the expected answer: both are read
again from the data files. Rows whose file is gone or whose content changed since (by digest) show
without them, and the page (and the command, on stderr) says so, naming the rows (`context_warnings`).
"""

from __future__ import annotations

import os
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._files import exclusive_lock
from ._analysis import Transcript, analyse_split, target_depth
from ._failures import failure_summary, write_panel_plots
from ._floors import Floor, declared_floors
from ._items import EvalItem, EvalRecipe, FileError, read_items, recipe_named
from ._planner import graded_text
from ._plots import plot_summary
from ._report import read_run_dir, run_rows, summarize_records
from ._results import (
    LOCK_NAME,
    PLOT_NAME,
    RESULTS_NAME,
    STATUS_OK,
    ResultsWriter,
    latest_records,
)
from ._view import ViewReport, ViewSample

UNANALYSED = "unanalysed"  # a scored row whose conversation could not be read again


#: The flags of a row's analysis (`RowAnalysis`) the page shows, in this order.
FLAGS = ("repeated", "case_changed", "before_prefix", "more_writings")


def _items_of(path: str, rows: set[int], recipes: Sequence[EvalRecipe], cache: bool = True) -> dict[int, EvalItem]:
    """The items of `rows` of one data file ({} when the file cannot be read any more)."""
    try:
        return {
            item.row: item
            for item in read_items(path, recipes=recipes, skip=lambda row, digest: row not in rows, cache=cache)
            if item.row in rows and item.messages
        }
    except (FileError, OSError):
        return {}


def _with_items(
    records: Sequence[dict[str, Any]],
    recipes: Sequence[EvalRecipe],
    items: dict[str, dict[int, EvalItem]] | None = None,
) -> list[tuple[dict, EvalItem | None]]:
    """Each record with the item of its row as the data file holds it now (None when the file or
    the row's content changed or is gone), in the order given; `items` are those already read."""
    by_file: dict[str, set[int]] = defaultdict(set)
    for record in records:
        by_file[record["file"]].add(int(record["row"]))
    items = dict(items or {})
    for path, rows in by_file.items():
        if path not in items:
            items[path] = _items_of(path, rows, recipes)
    paired = []
    for record in records:
        item = items[record["file"]].get(int(record["row"]))
        paired.append((record, item if item is not None and item.digest == record.get("digest") else None))
    return paired


def _rows_text(rows: list[int]) -> str:
    shown = ", ".join(map(str, rows[:20]))
    return (
        f"row {shown}" if len(rows) == 1 else f"rows {shown}{f' and {len(rows) - 20} more' if len(rows) > 20 else ''}"
    )


def context_warnings(paired: Sequence[tuple[dict, EvalItem | None]]) -> list[str]:
    """One line per data file whose rows lost their context (conversation and expected answer):
    the file is missing, or holds other content now than when the rows were run (digest)."""
    lost: dict[str, list[int]] = defaultdict(list)
    for record, item in paired:
        if item is None and record.get("status") != "skipped":
            lost[str(record["file"])].append(int(record["row"]))
    warnings = []
    for path, rows in sorted(lost.items()):
        why = "is missing" if not os.path.exists(path) else "changed since the run (or cannot be read)"
        warnings.append(
            f"data file {path} {why}: {_rows_text(sorted(rows))} show without their conversation and "
            "expected answer (outcomes as stored)"
        )
    return warnings


def _transcript(item: EvalItem | None, recipes: Sequence[EvalRecipe]) -> Transcript | None:
    return None if item is None else recipe_named(item.recipe, recipes).transcript(item)


def _analysis(
    record: dict, item: EvalItem | None, transcript: Transcript | None, recipes: Sequence[EvalRecipe], strip_think: bool
) -> dict | None:
    """The record's stored analysis, else the analysis of its reply (as the recipe's answer form
    splits it) when its row can be read."""
    if record.get("analysis") is not None or record.get("status") != STATUS_OK or item is None or transcript is None:
        return record.get("analysis")
    text = graded_text(str(record.get("response") or ""), strip_think)
    reply = recipe_named(item.recipe, recipes).answer_form.split(text, item)
    return analyse_split(reply, transcript, record.get("finish_reason")).model_dump()


def add_analyses(run_dir: str | os.PathLike, *, recipes: Sequence[EvalRecipe]) -> int:
    """Give every scored row of RUN_DIR that has no failure analysis one (a run of an earlier
    version), appended to results.jsonl as the row's latest record; returns how many. Holds the
    run folder's lock: refused (`_files.Busy`) while a run writes the folder."""

    run_dir = Path(run_dir)
    with exclusive_lock(run_dir / LOCK_NAME, f"the run folder {run_dir}"):
        records, run = read_run_dir(run_dir)
        strip_think = bool((run.get("settings") or {}).get("strip_think"))
        missing = [
            r for r in latest_records(records).values() if r.get("status") == STATUS_OK and r.get("analysis") is None
        ]
        added = 0
        with ResultsWriter(run_dir / RESULTS_NAME) as writer:
            for record, item in _with_items(missing, recipes):
                analysis = _analysis(record, item, _transcript(item, recipes), recipes, strip_think)
                if analysis is not None:
                    writer.write(record | {"analysis": analysis})
                    added += 1
        return added


def view_samples(
    records: Sequence[dict[str, Any]],
    *,
    recipes: Sequence[EvalRecipe],
    strip_think: bool = False,
    items: dict[str, dict[int, EvalItem]] | None = None,
) -> tuple[list[ViewSample], list[dict[str, Any]], list[str]]:
    """The page's samples of some result records, the records with their analyses (stored or
    computed now) for `failure_summary`, and the warnings of rows that lost their context
    (`context_warnings`); `items` (file -> row -> item) saves reading them again."""
    samples, analysed = [], []
    paired = _with_items(records, recipes, items)
    for record, item in paired:
        transcript = _transcript(item, recipes)
        analysis = _analysis(record, item, transcript, recipes, strip_think)
        status = str(record.get("status"))
        if status == STATUS_OK:
            outcome = analysis["returned"] if analysis else UNANALYSED
        else:
            outcome = status
        depth = (analysis or {}).get("target_depth")
        if depth is None and transcript is not None:
            depth = target_depth(transcript)
        samples.append(
            ViewSample(
                **_strip_fields(transcript, analysis, item),
                context_lost=item is None and status != "skipped",
                file=str(record["file"]),
                row=int(record["row"]),
                bin=str(record.get("bin")),
                bin_upper=int(record.get("bin_upper") or 0),
                n_needles=int(record.get("n_needles") or 0),
                status=status,
                score=record.get("score") if status == STATUS_OK else None,
                outcome=outcome,
                prefix=(analysis or {}).get("prefix"),
                target_ordinal=(analysis or {}).get("target_ordinal") or (transcript.target if transcript else None),
                returned_ordinal=(analysis or {}).get("returned_ordinal"),
                returned_index=(analysis or {}).get("returned_index"),
                target_depth=depth,
                returned_depth=(analysis or {}).get("returned_depth"),
                match_ratio=(analysis or {}).get("match_ratio"),
                truncated=bool((analysis or {}).get("truncated")),
                query=transcript.query if transcript is not None else "",
                expected=item.answer if item is not None else "",
                reply=record.get("response"),
                error=record.get("error"),
            )
        )
        analysed.append(record | {"analysis": analysis})
    return samples, analysed, context_warnings(paired)


def _strip_fields(transcript: Transcript | None, analysis: dict | None, item: EvalItem | None) -> dict[str, Any]:
    """What the needle strip and the returned writing need: every needle's depth, the
    conversation's length, the row's prefix, the analysis' flags, and the text of the writing the
    reply returned when it is not the target."""
    if transcript is None:
        return {}
    analysis = analysis or {}
    returned_text = None
    if analysis.get("returned") in ("other_needle", "distractor"):
        returned_text = next((w.text for w in transcript.writings if w.index == analysis.get("returned_index")), None)
    length = transcript.length or 1
    return {
        "needle_depths": [round(transcript.writings[k].offset / length, 4) for k in transcript.needles],
        "context_chars": transcript.length,
        "prefix_text": item.prefix if item is not None else transcript.prefix,
        "returned_text": returned_text,
        "flags": [flag for flag in FLAGS if analysis.get(flag)],
    }


def _plots(
    summary: dict[str, Any] | None, failures: dict[str, Any], title: str, floors: Sequence[Floor] = ()
) -> dict[str, bytes]:
    """The run's plots as PNG bytes: `plot.png` of `summary` (when given) and the failure plots,
    one image per panel (needle count)."""
    with tempfile.TemporaryDirectory(prefix="mrcr-view-") as tmp:
        names = write_panel_plots(failures, tmp, title)
        if summary is not None:
            plot_summary(summary, Path(tmp) / PLOT_NAME, floors=floors)
            names = [PLOT_NAME, *names]
        return {name: (Path(tmp) / name).read_bytes() for name in names}


HEADLINE = ("model", "mean_score", "auc_128k", "auc_1m", "mean_128k", "mean_1m", "complete", "official")


def run_view(run_dir: str | os.PathLike, *, recipes: Sequence[EvalRecipe]) -> ViewReport:
    """The HTML report of a run folder: its summary, plots, outcomes and every row it describes."""
    records, run = read_run_dir(run_dir)
    return records_view(records, run, Path(run_dir).name, recipes=recipes)


def records_view(
    records: Sequence[dict[str, Any]], run: dict[str, Any], name: str, *, recipes: Sequence[EvalRecipe]
) -> ViewReport:
    """The HTML report of a run's results records and run dict (a run folder's, or those read from
    another runner's log); `name` names the run in the title."""
    records = list(records)
    summary = summarize_records(records, run, recipes=recipes)
    records = run_rows(records, run)
    samples, analysed, warnings = view_samples(records, recipes=recipes, strip_think=not summary.get("official", True))
    failures = failure_summary(analysed)
    title = f"MRCR - {summary.get('model') or 'model'}"
    headline = {k: summary.get(k) for k in HEADLINE} | {
        "n_rows": summary.get("n_rows"),
        "n_scored": summary.get("n_scored"),
        "errors": (summary.get("errors") or {}).get("count"),
        "cost_usd": summary.get("cost_usd"),
    }
    ci = summary.get("ci") or {}
    return ViewReport(
        title=f"{title} ({name})",
        headline=headline,
        intervals={key: ci[key] for key in ("mean_score", "auc_128k", "auc_1m") if ci.get(key)},
        bins=[b | {"ci": (ci.get("bins") or {}).get(b["bin"])} for b in summary.get("bins", [])],
        warnings=warnings,
        plots=_plots(summary, failures, title, declared_floors(recipes)),
        outcomes=failures["outcomes"],
        samples=samples,
    )


def graded_view(
    data: str | os.PathLike,
    responses: dict[int, str],
    result: dict[str, Any],
    *,
    recipes: Sequence[EvalRecipe],
    cache: bool = True,
    items: dict[int, EvalItem] | None = None,
) -> ViewReport:
    """The HTML report of replies graded by `grade_responses` (`mrcr-grade --html`; `cache`: as
    the grading was given it, `--no-cache`). `items`: the graded rows' items the grading gave (so
    a row is read and counted once per command); the rows it lacks are read from DATA."""
    source = str(os.path.realpath(data))
    items = dict(items or {})
    unread = {r["row"] for r in result["rows"]} - items.keys()
    if unread:
        items |= _items_of(source, unread, recipes, cache)
    items = {row: item for row, item in items.items() if item.messages}
    records = [
        {
            "file": source,
            "row": r["row"],
            "digest": items[r["row"]].digest if r["row"] in items else None,
            "status": STATUS_OK,
            "score": r["score"],
            "bin": r["bin"],
            "n_needles": r["n_needles"],
            "response": responses[r["row"]],
            "analysis": r.get("analysis"),
        }
        for r in result["rows"]
    ]
    samples, analysed, warnings = view_samples(records, recipes=recipes, items={source: items})
    failures = failure_summary(analysed)
    plots = _plots(None, failures, "MRCR - graded replies")
    return ViewReport(
        title=f"MRCR - graded replies ({Path(data).name})",
        headline={"mean_score": result["mean"], "n_rows": result["n_rows"], "missing": len(result["missing"])},
        plots=plots,
        outcomes=failures["outcomes"],
        samples=samples,
        warnings=warnings,
    )
