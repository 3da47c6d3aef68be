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

import math
import os
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from inspect_ai.log import (
    EvalConfig,
    EvalDataset,
    EvalError,
    EvalLog,
    EvalPlan,
    EvalResults,
    EvalSample,
    EvalScore,
    EvalSpec,
    EvalStats,
    write_eval_log,
)
from inspect_ai.log._log import EvalScorer  # a field of EvalSpec that inspect_ai.log does not export
from inspect_ai.model import ChatMessageAssistant, GenerateConfig, ModelOutput, ModelUsage
from inspect_ai.scorer import SampleScore, Score

from .._files import atomic_path
from .._usage import Usage, cost, from_record, to_inspect
from ..eval._floors import floor_names
from ..eval._items import FileError
from ..eval._report import _is_current, read_run_dir, summarize_records
from ..eval._results import RESULTS_NAME, latest_records
from ..recipes import RECIPES, recipe_named
from ._dataset import chat_messages, file_labels, sample_id
from ._import import LENIENT_KEY, OVER_WINDOW, PACKAGE, RECORD_KEY, RUN_KEY, SCORE_KEY, SCORER, inspect_task_name
from ._tasks import TASK_VERSION, metric_definitions, metric_results


class ExportError(ValueError):
    """A run directory that cannot be exported: one line."""


def _inputs(records: list[dict[str, Any]]) -> dict[tuple[str, int], tuple[list[dict], str, str]]:
    """(messages, answer, random string) of each record's row, read from its data file where its
    digest still matches: what `inspect score` needs to grade the row again."""
    from ..eval._items import read_items

    wanted: dict[str, dict[int, str]] = defaultdict(dict)
    for record in records:
        wanted[record["file"]][int(record["row"])] = record.get("digest") or ""
    found: dict[tuple[str, int], tuple[list[dict], str, str]] = {}
    for path, rows in wanted.items():
        if not Path(path).is_file():
            continue

        def other_row(row: int, digest: str, rows: dict[int, str] = rows) -> bool:
            return rows.get(row) != digest

        try:
            for item in read_items(path, recipes=RECIPES, skip=other_row):
                if item.row in rows and item.digest == rows[item.row] and item.messages:
                    found[(path, item.row)] = (item.messages, item.answer, item.prefix)
        except FileError:
            continue
    return found


def inspect_usage(usage: Usage, price: dict[str, float] | None) -> ModelUsage:
    """`usage` as Inspect's ModelUsage (by Inspect's convention: `_usage.to_inspect`), with its
    cost at `price` (USD per 1M tokens, `_usage.cost`) where the price is known."""
    return ModelUsage(**to_inspect(usage, None if price is None else cost(price, usage)["cost_usd"]))


def _score(record: dict[str, Any]) -> Score:
    """The record's Score, as the task scores the row (see `_tasks.grade_reply`, `_tasks.not_sent`)."""
    status = record.get("status")
    metadata = {
        "status": status,
        "score_lenient": record.get("score_lenient"),
        "finish_reason": record.get("finish_reason"),
        "analysis": record.get("analysis"),
    } | {k: record[k] for k in (*floor_names(RECIPES), "error", "check") if k in record}
    if status == "ok":
        lenient = record.get("score_lenient")
        value = {SCORE_KEY: float(record["score"]), LENIENT_KEY: math.nan if lenient is None else float(lenient)}
    else:
        value = {SCORE_KEY: math.nan if status == "skipped" else 0.0, LENIENT_KEY: math.nan}
    return Score(
        value=value,
        answer=record.get("response") or "",
        explanation=f"status {status}" + (f": {record.get('error')}" if status == "error" else ""),
        reason=OVER_WINDOW if status == "skipped" else None,
        metadata=metadata,
    )


def _sample(record: dict[str, Any], model: str, inputs: dict, sample_id: str, price: dict | None) -> EvalSample:
    status = record.get("status")
    messages, answer, prefix = inputs.get((record["file"], int(record["row"])), (None, "", None))
    if messages is None:
        why = "not sent" if status != "ok" else "not exported"
        input_value: Any = f"({why}: {record['file']} row {record['row']})"
    else:
        input_value = chat_messages(messages, sample_id)
    response = record.get("response") or ""
    output = ModelOutput.from_content(model, response) if status == "ok" else ModelOutput(model=model)
    usage = inspect_usage(from_record(record.get("usage")), price) if status == "ok" else None
    output.usage = usage
    conversation = (input_value if isinstance(input_value, list) else []) + (
        [ChatMessageAssistant(content=response)] if status == "ok" else []
    )
    # A request that failed is Inspect's sample error (`inspect eval-retry` runs it again); a row
    # that could not be read was never sent (0 attempts): scored 0, as the task scores it.
    failed = status == "error" and record.get("attempts") != 0
    metadata = {
        "file": record["file"],
        "row": record["row"],
        "digest": record.get("digest"),
        "data_sha256": record.get("data_sha256"),
        "recipe": record.get("recipe"),
        "bin": record.get("bin"),
        "bin_upper": record.get("bin_upper"),
        "n_needles": record.get("n_needles"),
        "random_string": prefix,
        "target_depth": (record.get("analysis") or {}).get("target_depth"),
        "o200k_prompt_tokens": record.get("o200k_prompt_tokens"),
        "o200k_tokens": record.get("o200k_tokens"),
        "status": status,
        **({"max_context_window": record.get("max_context_window")} if status == "skipped" else {}),
        RECORD_KEY: record,
    }
    return EvalSample(
        id=sample_id,
        epoch=1,
        input=input_value,
        target=answer,
        messages=conversation,
        output=output,
        scores={SCORER: _score(record)},
        metadata=metadata,
        model_usage={model: usage} if usage is not None else {},
        total_time=record.get("latency_s"),
        error=EvalError(message=str(record.get("error") or "request failed"), traceback="", traceback_ansi="")
        if failed
        else None,
    )


def _results(samples: list[EvalSample], window: int | None) -> EvalResults:
    """The log's results: the task's metrics (`_tasks.metric_results`) over the samples' scores."""
    scores = [
        SampleScore(score=s.scores[SCORER], sample_id=s.id, sample_metadata=s.metadata) for s in samples if s.scores
    ]
    # Inspect's count: scores NaN at the root (a row over the window is NaN in each key instead,
    # so that its bin counts it 0 as `mrcr-eval` does; Inspect leaves it out of a key's metrics)
    unscored = sum(1 for s in scores if isinstance(s.score.value, float) and math.isnan(s.score.value))
    return EvalResults(
        total_samples=len(samples),
        completed_samples=sum(1 for s in samples if s.error is None),
        scores=[
            EvalScore(
                name=SCORER,
                scorer=SCORER,
                metrics=metric_results(scores, window),
                scored_samples=len(scores) - unscored,
                unscored_samples=unscored,
            )
        ],
    )


def _model_usage(summary: dict[str, Any], model: str) -> dict[str, ModelUsage]:
    """The run's usage and cost as its summary counts them (each paid reply once: a reply several
    rows of a batch run share is not counted again for each sample)."""
    usage = from_record(summary.get("usage"))
    return {model: ModelUsage(**to_inspect(usage, summary.get("cost_usd")))}


def inspect_model(model: str) -> str:
    """A mrcr-eval run's model as Inspect names it: Inspect's OpenAI provider, `openai/MODEL`, which
    `inspect eval-retry` calls at the run's base URL (mrcr-eval speaks the OpenAI chat API)."""
    return f"openai/{model}"


def _data_files(run: dict[str, Any], records: list[dict[str, Any]]) -> list[str]:
    """The files the run's last command read (run.json `selection`), in its order: the task's
    `data`, so that its filters select the same rows; the records' files for an older run.json."""
    selected = _part(run, "selection").get("files")
    found = {r["file"] for r in records}
    if isinstance(selected, list) and found <= set(selected):
        return [str(path) for path in selected]
    return sorted(found)


def _part(record: dict[str, Any], name: str) -> dict[str, Any]:
    """`record[name]` where it is a dict, else empty (a run.json of an earlier version lacks it)."""
    found = record.get(name)
    return found if isinstance(found, dict) else {}


def _task_args(run: dict[str, Any], files: list[str]) -> dict[str, Any]:
    """The task arguments that select the run's rows as `mrcr-eval` selected them."""
    options, settings = _part(run, "options"), _part(run, "settings")
    extra_body = _part(settings, "request").get("extra_body")
    args = {
        "data": files,
        "max_context_window": run.get("max_context_window"),
        "needles": options.get("needles"),
        "bins": options.get("bins"),
        "limit": options.get("limit") or None,
        "tokenizer": options.get("tokenizer_spec"),
        "per_bin": options.get("per_bin"),
        "per_bin_seed": options.get("per_bin_seed") or None,
        "control": settings.get("control"),
        "strip_think": settings.get("strip_think") or None,
        "extra_body": extra_body,
    }
    return {name: value for name, value in args.items() if value is not None}


def _generate_config(run: dict[str, Any]) -> GenerateConfig:
    """The run's sampling parameters as Inspect's generation config."""
    request = _part(_part(run, "settings"), "request")
    return GenerateConfig(
        temperature=request.get("temperature"),
        max_tokens=request.get("max_completion_tokens") or request.get("max_tokens"),
        reasoning_effort=request.get("reasoning_effort"),
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
    model = inspect_model(str(run.get("model") or "unknown"))
    price = run.get("price_per_1m") if isinstance(run.get("price_per_1m"), dict) else None
    inputs = _inputs(records) if include_input else {}
    files = _data_files(run, records)
    labels = file_labels(files)
    samples = [
        _sample(record, model, inputs, sample_id(labels[record["file"]], int(record["row"])), price)
        for record in records
    ]
    created = datetime.now(timezone.utc).isoformat(timespec="seconds")
    recipes = sorted({str(r.get("recipe")) for r in records})
    window = run.get("max_context_window")
    task_args = _task_args(run, files)
    spec = EvalSpec(
        created=created,
        task=_task_of(recipes),
        task_registry_name=_task_of(recipes),
        task_version=TASK_VERSION,
        task_args=task_args,
        task_args_passed=task_args,
        dataset=EvalDataset(
            name=", ".join(recipes), location=str(run_dir), samples=len(samples), sample_ids=[s.id for s in samples]
        ),
        model=model,
        model_base_url=run.get("base_url"),
        model_generate_config=_generate_config(run),
        config=EvalConfig(epochs=1),
        scorers=[
            EvalScorer(
                name=f"{PACKAGE}/{SCORER}",
                options={"strip_think": bool(_part(run, "settings").get("strip_think"))},
                metrics=list(metric_definitions(window)),
            )
        ],
        metadata={RUN_KEY: run, "exported_from": str(run_dir), "exported_by": "mrcr-eval export-inspect"},
    )
    log = EvalLog(
        status="success" if summary["complete"] else "error",
        eval=spec,
        plan=EvalPlan(config=_generate_config(run)),
        results=_results(samples, window),
        stats=EvalStats(started_at=created, completed_at=created, model_usage=_model_usage(summary, model)),
        samples=samples,
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(out) as tmp:
        write_eval_log(log, str(tmp), format="eval" if out.suffix == ".eval" else "json")
    return out


def _task_of(recipes: list[str]) -> str:
    """The Inspect task of a run's recipe; a run over several recipes' files takes the first registered one's."""
    known = [recipe_named(name) for name in recipes if name in {r.name for r in RECIPES}]
    return f"{PACKAGE}/{inspect_task_name(known[0] if len(known) == 1 else RECIPES[0])}"
