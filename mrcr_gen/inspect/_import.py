"""Inspect's runs in our reports: an Inspect log of `mrcr_gen/mrcr` or `mrcr_gen/mrcr_v2` (or one
`mrcr-eval export-inspect` wrote) read as `mrcr-eval` results records and a run dict, so that
`mrcr-eval report` and `compare` (and anything reading a summary) work on it.

A record has the fields of `results.jsonl` the reports read (file, row, digest, recipe, bin,
bin_upper, n_needles, status, score, score_lenient, response, finish_reason, usage, latency_s,
analysis, floors). A sample Inspect failed (no score) is an `error` record: it counts 0, as a
failed row does in `mrcr-eval`. Only the first epoch is read: MRCR scores one reply per row.
A log `export_run` wrote carries each original record (sample metadata `mrcr_record`) and the
run (`eval.metadata["mrcr_run"]`): those come back unchanged.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._api import run_view, summarize_run
from .._usage import FIELDS as USAGE_FIELDS
from .._usage import from_inspect
from ..eval._compare import compare_entry
from ..eval._control import pair_controls
from ..eval._floors import floor_names
from ..eval._report import summarize_records
from ..eval._run_view import records_view
from ..eval._view import ViewReport
from ..recipes import RECIPES


def inspect_task_name(recipe: Any) -> str:
    """A recipe's Inspect task (`mrcr_gen/<this>`): what it declares, else its name with underscores."""
    return getattr(recipe, "inspect_task", None) or recipe.name.replace("-", "_")


#: The registered tasks, one per recipe: `mrcr_gen/mrcr`, `mrcr_gen/mrcr_v2`, and a plugin's.
TASKS = tuple(f"mrcr_gen/{inspect_task_name(recipe)}" for recipe in RECIPES)
TASK_KEY = "mrcr_gen_recipe"  # eval metadata of a log of these tasks: the recipe the task reads
SCORER = "mrcr_scorer"
RECORD_KEY = "mrcr_record"  # sample metadata of an exported run: the original results record
RUN_KEY = "mrcr_run"  # eval metadata of an exported run: the original run.json
_ROW_FIELDS = (
    "file",
    "row",
    "digest",
    "recipe",
    "bin",
    "bin_upper",
    "n_needles",
    "o200k_prompt_tokens",
    "o200k_tokens",
)


class InspectLogError(ValueError):
    """A file that is not an Inspect log of these tasks: one line."""


def is_inspect_log(path: str | os.PathLike) -> bool:
    """Whether `path` names an Inspect log file (`.eval`, or a `.json` log) rather than a run directory."""
    path = Path(path)
    if not path.is_file():
        return False
    if path.suffix == ".eval":
        return True
    if path.suffix != ".json":
        return False
    with open(path, "rb") as handle:
        head = handle.read(4096)
    return b'"eval"' in head and b'"version"' in head


def _inspect_log_api() -> Any:
    try:
        from inspect_ai import log
    except ImportError:
        raise InspectLogError("reading Inspect logs needs inspect_ai: pip install 'mrcr-gen[inspect]'") from None
    return log


def _run_of(header: Any, path: Path) -> dict[str, Any]:
    """The run dict (`run.json`'s fields the reports read) of an Inspect log's header."""
    exported = (header.eval.metadata or {}).get(RUN_KEY)
    if isinstance(exported, dict):
        return exported
    if TASK_KEY not in (header.eval.metadata or {}) and header.eval.task not in TASKS:
        raise InspectLogError(f"{path}: a log of the task {header.eval.task}, not of {' or '.join(TASKS)}")
    args = header.eval.task_args or {}
    window = args.get("max_context_window")
    config = header.plan.config.model_dump(exclude_none=True) if header.plan else {}
    return {
        "model": header.eval.model,
        "base_url": header.eval.model_base_url,
        "max_context_window": None if window is None else int(window),
        "settings": config,
        "finished": header.status == "success",
        "inspect_log": str(path),
        "task": header.eval.task,
        "task_args": args,
    }


def record_of(sample: Any) -> dict[str, Any]:
    """The results record of one sample of these tasks."""
    metadata = sample.metadata or {}
    if isinstance(metadata.get(RECORD_KEY), dict):
        return dict(metadata[RECORD_KEY])
    record: dict[str, Any] = {name: metadata.get(name) for name in _ROW_FIELDS}
    score = (sample.scores or {}).get(SCORER)
    scored = (score.metadata or {}) if score is not None else {}
    status = metadata.get("status", "ok") if score is None else scored.get("status", "ok")
    if status == "skipped":
        return record | {
            "status": "skipped",
            "reason": "context",
            "max_context_window": metadata.get("max_context_window"),
        }
    if sample.error is not None or score is None or status == "error":
        message = sample.error.message if sample.error is not None else metadata.get("error") or "no score"
        check = metadata.get("check") or "request"
        return record | {"status": "error", "check": check, "error": str(message).splitlines()[0] if message else ""}
    usage = sample.output.usage if sample.output is not None else None
    response = score.answer if score.answer is not None else sample.output.completion
    return (
        record
        | {
            "status": "ok",
            "response": response,
            "score": float(score.value),
            "score_lenient": scored.get("score_lenient"),
            "content_null": False,
            "think": "<think>" in response,
            "reasoning_chars": 0,
            "finish_reason": scored.get("finish_reason"),
            "latency_s": sample.total_time,
            "attempts": 1,
            "usage": from_inspect(usage).as_record() if usage else dict.fromkeys(USAGE_FIELDS),
            "analysis": scored.get("analysis"),
        }
        | {name: scored[name] for name in floor_names(RECIPES) if name in scored}
    )


def read_inspect_log(path: str | os.PathLike) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(results records, run dict) of an Inspect log of these tasks; InspectLogError otherwise.
    Samples are read one at a time, without their messages and events."""
    path = Path(path)
    log = _inspect_log_api()
    try:
        header = log.read_eval_log(str(path), header_only=True)
    except Exception as exc:
        raise InspectLogError(f"{path}: not a readable Inspect log: {str(exc).strip().splitlines()[0]}") from None
    run = _run_of(header, path)
    records = [
        record_of(sample)
        for sample in log.read_eval_log_samples(
            str(path),
            all_samples_required=False,
            exclude_fields={"messages", "events", "attachments", "store"},
        )
        if sample.epoch == 1
    ]
    return records, run


def summarize_inspect_log(path: str | os.PathLike) -> dict[str, Any]:
    """The `mrcr-eval report` summary of an Inspect log (nothing written)."""
    records, run = read_inspect_log(path)
    return summarize_records(records, run, recipes=RECIPES)


def summarize_path(path: str | os.PathLike) -> dict[str, Any]:
    """The summary of a run directory or of an Inspect log."""
    return summarize_inspect_log(path) if is_inspect_log(path) else summarize_run(path)


def compare_paths(paths: Sequence[str | os.PathLike]) -> list[dict[str, Any]]:
    """`mrcr-eval compare`'s entries for run directories and Inspect logs alike."""
    return pair_controls([compare_entry(path, summarize_path(path)) for path in paths])


def inspect_log_view(path: str | os.PathLike) -> ViewReport:
    """The HTML report (`mrcr-eval view`) of an Inspect log of these tasks; the conversations are
    read again from the data files the samples name, as for a run folder."""
    records, run = read_inspect_log(path)
    return records_view(records, run, Path(path).name, recipes=RECIPES)


def view_path(path: str | os.PathLike) -> ViewReport:
    """The HTML report of a run directory or of an Inspect log."""
    return inspect_log_view(path) if is_inspect_log(path) else run_view(path)
