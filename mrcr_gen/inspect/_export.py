"""Our runs in Inspect's viewer: a `mrcr-eval` run directory written as an Inspect log
(`mrcr-eval export-inspect RUN_DIR -o FILE.eval`), which `inspect_ai.log.read_eval_log` reads and
`inspect view` shows.

One sample per row the run's summary counts (the latest current record of each row): its input
(the row's messages, read again from the run's data files when they still hold the row; a note
otherwise, or with `include_input=False`), the reply as output, the official score with the
lenient grade, the failure analysis and the floors in its metadata, and the row's fields (file,
row, bin, needle count, random string, ...). The log's results are the run's summary numbers
(mean, AUCs, the mean per bin and per needle count). Each sample keeps its original record and
the log the run's `run.json`, so that reading the log back (`read_inspect_log`) gives the run's
summary exactly.
"""

from __future__ import annotations

import os
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from inspect_ai.log import (
    EvalConfig,
    EvalDataset,
    EvalLog,
    EvalMetric,
    EvalPlan,
    EvalResults,
    EvalSample,
    EvalScore,
    EvalSpec,
    EvalStats,
    write_eval_log,
)
from inspect_ai.model import ChatMessageAssistant, ModelOutput, ModelUsage
from inspect_ai.scorer import Score

from .._files import atomic_path
from .._usage import from_record, to_inspect
from ..eval._floors import floor_names
from ..eval._items import FileError
from ..eval._report import _is_current, read_run_dir, summarize_records
from ..eval._results import RESULTS_NAME, latest_records
from ..recipes import RECIPES, recipe_named
from ._dataset import chat_messages
from ._import import RECORD_KEY, RUN_KEY, SCORER, inspect_task_name


class ExportError(ValueError):
    """A run directory that cannot be exported: one line."""


def _inputs(records: list[dict[str, Any]]) -> dict[tuple[str, int], tuple[list[dict], str]]:
    """(messages, answer) of each record's row, read from its data file where its digest still matches."""
    from ..eval._items import read_items

    wanted: dict[str, dict[int, str]] = defaultdict(dict)
    for record in records:
        wanted[record["file"]][int(record["row"])] = record.get("digest") or ""
    found: dict[tuple[str, int], tuple[list[dict], str]] = {}
    for path, rows in wanted.items():
        if not Path(path).is_file():
            continue

        def other_row(row: int, digest: str, rows: dict[int, str] = rows) -> bool:
            return rows.get(row) != digest

        try:
            for item in read_items(path, recipes=RECIPES, skip=other_row):
                if item.row in rows and item.digest == rows[item.row] and item.messages:
                    found[(path, item.row)] = (item.messages, item.answer)
        except FileError:
            continue
    return found


def _sample(record: dict[str, Any], model: str, inputs: dict, used_ids: set[str]) -> EvalSample:
    status = record.get("status")
    messages, answer = inputs.get((record["file"], int(record["row"])), (None, ""))
    if messages is None:
        why = "not sent" if status != "ok" else "not exported"
        input_value: Any = f"({why}: {record['file']} row {record['row']})"
    else:
        input_value = chat_messages(messages, str(record.get("digest") or ""))
    sample_id = str(record.get("digest") or f"{record['file']}:{record['row']}")
    if sample_id in used_ids:
        sample_id = f"{sample_id}-{record['row']}"
    used_ids.add(sample_id)
    response = record.get("response") or ""
    usage = record.get("usage") or {}
    output = ModelOutput.from_content(model, response) if status == "ok" else ModelOutput(model=model)
    if status == "ok":
        output.usage = ModelUsage(**to_inspect(from_record(usage)))
    score_metadata = {
        "status": status,
        "score_lenient": record.get("score_lenient"),
        "finish_reason": record.get("finish_reason"),
        "analysis": record.get("analysis"),
    } | {k: record[k] for k in (*floor_names(RECIPES), "error", "check") if k in record}
    score = Score(
        value=float(record["score"]) if status == "ok" else 0.0,
        answer=response,
        explanation=f"status {status}" + (f": {record.get('error')}" if status == "error" else ""),
        metadata=score_metadata,
    )
    conversation = (input_value if isinstance(input_value, list) else []) + (
        [ChatMessageAssistant(content=response)] if status == "ok" else []
    )
    metadata = {
        "file": record["file"],
        "row": record["row"],
        "digest": record.get("digest"),
        "recipe": record.get("recipe"),
        "bin": record.get("bin"),
        "bin_upper": record.get("bin_upper"),
        "n_needles": record.get("n_needles"),
        "target_depth": (record.get("analysis") or {}).get("target_depth"),
        "status": status,
        RECORD_KEY: record,
    }
    return EvalSample(
        id=sample_id,
        epoch=1,
        input=input_value,
        target=answer,
        messages=conversation,
        output=output,
        scores={SCORER: score},
        metadata=metadata,
        total_time=record.get("latency_s"),
    )


def _results(summary: dict[str, Any], records: list[dict[str, Any]]) -> EvalResults:
    numbers: dict[str, float | None] = {
        "mean": summary["mean_score"],
        "lenient": summary["mean_score_lenient"],
        "auc_128k": summary["auc_128k"],
        "auc_1m": summary["auc_1m"],
    }
    upper = {r["bin"]: r.get("bin_upper") for r in records}  # as the task's metrics name them: bin_4095 for "<4096"
    numbers |= {f"bin_{upper[b['bin']]}": b["mean_score"] for b in summary["bins"] if upper.get(b["bin"])}
    numbers |= {f"needles_{n['n_needles']}": n["mean_score"] for n in summary["by_needles"]}
    metrics = {name: EvalMetric(name=name, value=float(value)) for name, value in numbers.items() if value is not None}
    return EvalResults(
        total_samples=len(records),
        completed_samples=summary["n_scored"],
        scores=[EvalScore(name=SCORER, scorer=SCORER, metrics=metrics)],
    )


def export_run(run_dir: str | os.PathLike, out: str | os.PathLike, *, include_input: bool = True) -> Path:
    """Write RUN_DIR as an Inspect log at `out` (`.eval`, or `.json` for Inspect's JSON log); returns `out`.
    `include_input=False` leaves the rows' messages out (a short note instead): a small log."""
    run_dir, out = Path(run_dir), Path(out)
    if out.suffix not in (".eval", ".json"):
        raise ExportError(f"{out}: an Inspect log is named *.eval (or *.json)")
    results_path = run_dir / RESULTS_NAME
    if not results_path.is_file():
        raise ExportError(f"{run_dir} has no {RESULTS_NAME}: not a mrcr-eval run directory")
    try:
        all_records, run = read_run_dir(run_dir)
    except ValueError as exc:  # run.json that is not JSON, results of no readable record
        raise ExportError(str(exc)) from None
    summary = summarize_records(all_records, run, recipes=RECIPES)
    records = [r for r in latest_records(all_records).values() if _is_current(r, run)]
    records.sort(key=lambda r: (r["file"], int(r["row"])))
    model = str(run.get("model") or "unknown")
    inputs = _inputs(records) if include_input else {}
    used: set[str] = set()
    samples = [_sample(record, model, inputs, used) for record in records]
    created = datetime.now(timezone.utc).isoformat(timespec="seconds")
    recipes = sorted({str(r.get("recipe")) for r in records})
    files = sorted({r["file"] for r in records})
    spec = EvalSpec(
        created=created,
        task=_task_of(recipes),
        task_args={"data": files, "max_context_window": run.get("max_context_window")},
        dataset=EvalDataset(
            name=", ".join(recipes), location=str(run_dir), samples=len(samples), sample_ids=[s.id for s in samples]
        ),
        model=model,
        model_base_url=run.get("base_url"),
        config=EvalConfig(),
        metadata={RUN_KEY: run, "exported_from": str(run_dir), "exported_by": "mrcr-eval export-inspect"},
    )
    log = EvalLog(
        status="success" if summary["complete"] else "error",
        eval=spec,
        plan=EvalPlan(),
        results=_results(summary, records),
        stats=EvalStats(started_at=created, completed_at=created),
        samples=samples,
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(out) as tmp:
        write_eval_log(log, str(tmp), format="eval" if out.suffix == ".eval" else "json")
    return out


def _task_of(recipes: list[str]) -> str:
    """The Inspect task of a run's recipe; a run over several recipes' files takes the first registered one's."""
    known = [recipe_named(name) for name in recipes if name in {r.name for r in RECIPES}]
    return f"mrcr_gen/{inspect_task_name(known[0] if len(known) == 1 else RECIPES[0])}"
