"""Inspect's runs in our reports: an Inspect log of `mrcr_gen/mrcr` or `mrcr_gen/mrcr_v2` (or one
`mrcr-eval export-inspect` wrote) read as `mrcr-eval` results records and a run dict, so that
`mrcr-eval report` and `compare` (and anything reading a summary) work on it.

A record has the fields of `results.jsonl` the reports read (file, row, digest, recipe, bin,
bin_upper, n_needles, status, score, score_lenient, response, finish_reason, usage, latency_s,
analysis, floors). A sample Inspect failed (no score) is an `error` record: it counts 0, as a
failed row does in `mrcr-eval`. A log of several epochs (`--epochs N`) gives one record per row:
its score and lenient grade are the mean over the epochs that were scored (Inspect's default
`mean` reducer), its usage every epoch's (each reply was paid for), its reply and analysis the
first scored epoch's; the summary says so (`epochs`). The cost is priced from the usage at the
model's list price when `mrcr_gen._prices` knows the model (`openai/gpt-4.1` -> `gpt-4.1`).
A log `export_run` wrote carries each original record (sample metadata `mrcr_record`) and the
run (`eval.metadata["mrcr_run"]`): those come back unchanged.
"""

from __future__ import annotations

import math
import os
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._api import run_view, summarize_run
from .._prices import price_per_1m
from .._usage import FIELDS as USAGE_FIELDS
from .._usage import from_inspect, ledger_usage
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


PACKAGE = "mrcr_gen"  # Inspect's namespace of our tasks, scorer and metrics (the `inspect_ai` entry point's name)
#: The registered tasks, one per recipe: `mrcr_gen/mrcr`, `mrcr_gen/mrcr_v2`, and a plugin's.
TASKS = tuple(f"{PACKAGE}/{inspect_task_name(recipe)}" for recipe in RECIPES)
TASK_KEY = "mrcr_gen_recipe"  # eval metadata of a log of these tasks: the recipe the task reads
SCORER = "mrcr_scorer"
SCORE_KEY, LENIENT_KEY = "score", "lenient"  # the keys of the scorer's value
OVER_WINDOW = "over_context_window"  # the `reason` of a row's unscored Score: not sent, over the window
RECORD_KEY = "mrcr_record"  # sample metadata of an exported run: the original results record
RUN_KEY = "mrcr_run"  # eval metadata of an exported run: the original run.json
_ROW_FIELDS = (
    "file",
    "row",
    "digest",
    "data_sha256",
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
    metadata = header.eval.metadata or {}
    window = args.get("max_context_window")
    config = header.plan.config.model_dump(exclude_none=True) if header.plan else {}
    settings = config | {name: metadata[name] for name in ("control", "strip_think") if metadata.get(name)}
    return {
        "model": header.eval.model,
        "base_url": header.eval.model_base_url,
        "max_context_window": None if window is None else int(window),
        "settings": settings,
        "finished": header.status == "success",
        "inspect_log": str(path),
        "task": header.eval.task,
        "task_args": args,
        "price_per_1m": price_per_1m(provider_model(header.eval.model)),
    } | ({"data": metadata["data"]} if isinstance(metadata.get("data"), list) else {})


def provider_model(model: str) -> str:
    """The API's model name of Inspect's `PROVIDER/MODEL` (`openai/gpt-4.1`, `openai-api/SERVICE/MODEL`)."""
    parts = model.split("/")
    return "/".join(parts[2:] if parts[0] == "openai-api" and len(parts) > 2 else parts[1:]) or model


def score_value(score: Any, key: str) -> float | None:
    """One key of a score's value (`score` or `lenient`); a log of an earlier version holds the
    official grade as the value, the lenient grade in the metadata. None where unscored."""
    value = score.value
    if isinstance(value, dict):
        found = value.get(key)
    else:
        found = value if key == SCORE_KEY else (score.metadata or {}).get("score_lenient")
    if isinstance(found, bool) or not isinstance(found, int | float) or math.isnan(found):
        return None
    return float(found)


def record_of(sample: Any) -> dict[str, Any]:
    """The results record of one sample of these tasks."""
    metadata = sample.metadata or {}
    score = (sample.scores or {}).get(SCORER)
    if isinstance(metadata.get(RECORD_KEY), dict):
        exported = dict(metadata[RECORD_KEY])
        graded = None if score is None else score_value(score, SCORE_KEY)
        if exported.get("status") == "ok" and graded is not None:  # graded again since (`inspect score`, an edit)
            exported |= {"score": graded, "score_lenient": score_value(score, LENIENT_KEY)}
        return exported
    record: dict[str, Any] = {name: metadata.get(name) for name in _ROW_FIELDS}
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
            "score": score_value(score, SCORE_KEY) or 0.0,
            "score_lenient": score_value(score, LENIENT_KEY),
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
    # A sample the task itself ran in a log `export_run` wrote (`inspect eval-retry` of it) has no
    # original record: it is read as the task's, with the exported run's settings, so that the
    # run's summary counts it (its reply was paid for) rather than passing it over as another run's.
    fingerprint = run.get("fingerprint") if RUN_KEY in (header.eval.metadata or {}) else None
    exported = {} if fingerprint is None else {"settings": fingerprint}
    epochs: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for sample in log.read_eval_log_samples(
        str(path),
        all_samples_required=False,
        exclude_fields={"messages", "events", "attachments", "store"},
    ):
        own = isinstance((sample.metadata or {}).get(RECORD_KEY), dict)
        epochs[sample.id].append(record_of(sample) | ({} if own else exported))
    count = header.eval.config.epochs or 1
    if count > 1:
        run["epochs"] = {"count": count, "reducer": header.eval.config.epochs_reducer or ["mean"]}
    return [over_epochs(records) for records in epochs.values()], run


def over_epochs(records: list[dict[str, Any]]) -> dict[str, Any]:
    """One row's record of its epochs' records, as Inspect's `mean` reducer reduces them: the
    score and lenient grade are the mean over the scored epochs (an error only when none was),
    the usage is every epoch's, the rest the first scored epoch's."""
    if len(records) == 1:
        return records[0]
    scored = [r for r in records if r.get("status") == "ok"]
    if not scored:
        return records[0] | {"epochs": len(records), "epochs_scored": 0}
    lenient = [r["score_lenient"] for r in scored if r.get("score_lenient") is not None]
    return scored[0] | {
        "score": sum(r["score"] for r in scored) / len(scored),
        "score_lenient": sum(lenient) / len(lenient) if lenient else None,
        "usage": ledger_usage(scored).as_record(),  # every epoch's reply was paid for
        "epochs": len(records),
        "epochs_scored": len(scored),
    }


def epochs_note(run: dict[str, Any]) -> str | None:
    """What a report of a log of several epochs shows, in a line; None for one epoch."""
    epochs = run.get("epochs")
    if not isinstance(epochs, dict):
        return None
    reducers = [str(r) for r in epochs.get("reducer") or []]
    other = ", ".join(r for r in reducers if r != "mean")
    differs = f"; the log's own metrics used the reducer {other}" if other else ""
    return (
        f"{epochs['count']} epochs: each row's score and lenient grade are the mean over its scored epochs "
        f"(Inspect's mean reducer){differs}; tokens and cost are every epoch's; the reply, analysis and "
        "floors shown are the first scored epoch's"
    )


def summarize_inspect_log(path: str | os.PathLike) -> dict[str, Any]:
    """The `mrcr-eval report` summary of an Inspect log (nothing written); a log of several
    epochs adds `epochs_note` (see `over_epochs`)."""
    records, run = read_inspect_log(path)
    summary = summarize_records(records, run, recipes=RECIPES)
    note = epochs_note(run)
    return summary | ({"epochs_note": note} if note else {})


def inspect_logs_in(folder: str | os.PathLike) -> list[Path]:
    """The Inspect logs directly in `folder` (an `--log-dir`), by name."""
    return sorted(path for path in Path(folder).iterdir() if is_inspect_log(path))


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
    view = records_view(records, run, Path(path).name, recipes=RECIPES)
    note = epochs_note(run)
    if note:
        view.headline["epochs"] = note
    return view


def view_path(path: str | os.PathLike) -> ViewReport:
    """The HTML report of a run directory or of an Inspect log."""
    return inspect_log_view(path) if is_inspect_log(path) else run_view(path)
