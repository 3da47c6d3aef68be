"""Batch files: the OpenAI batch input format (one chat-completions request per line, `custom_id` =
the row digest), its output and error files (OpenAI's, and `vllm run-batch`'s, which has the same
shape), and grading their replies into an ordinary run folder (`mrcr-eval batch export` and
`mrcr-eval batch import`; `_batch` drives the OpenAI Batch API with the same pieces).

A batch reply is graded as the runner grades an online one (`scored_record`, the official policy:
every HTTP-200 body graded, whatever it holds); a request that failed, expired, or has no line in
the results is a row error (counts 0, a rerun sends it again). The run folder is walked by the same
`Planner`, so a batch run reports exactly what an online run of the same rows and replies would.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Container, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import Field

from .._files import atomic_path, file_sha256
from .._openai import ChatError, completion_from_body, is_prompt_too_long
from ._config import EvalConfig, EvalError, settings_fingerprint, with_stored_prices
from ._control import sent_messages
from ._items import EvalItem, EvalRecipe, recipe_named
from ._planner import JOB, Planner, base_record, scored_record
from ._results import RESULTS_NAME, STATUS_ERROR, ResultsWriter, read_results
from ._runner import (
    RunStats,
    _check_settings,
    _read_run_file,
    _write_run_file,
    locked_run_folder,
    resolve_inputs,
    run_record,
)

CHAT_URL = "/v1/chat/completions"
#: The `base_url` of the settings of a run graded from a results file (no server was asked).
OFFLINE = "offline"
#: The check of a row error: the batch expired before its request ran.
EXPIRED = "batch_expired"
#: The check of a row error: its batch failed or was cancelled and gave no line for it.
BATCH_FAILED = "batch_failed"
#: The check of a row error: the results file has no line for it.
NOT_IN_RESULTS = "not_in_results"
#: The check of a row error: its request alone is larger than a batch file may be.
TOO_LARGE = "batch_too_large"


def request_line(item: EvalItem, recipe: EvalRecipe, config: EvalConfig) -> dict[str, Any]:
    """One line of a batch input file: the body the online runner sends for this row (what a
    `--control` keeps of its messages, its `--extra-body` merged in as the client merges it),
    keyed by the row digest."""
    params = config.request_params()
    extra = params.pop("extra_body", None) or {}
    messages = sent_messages(item, recipe, config.control)
    body = {"model": config.model, "messages": messages, **params, **extra}
    return {"custom_id": item.digest, "method": "POST", "url": CHAT_URL, "body": body}


def encoded_line(line: dict[str, Any]) -> bytes:
    return (json.dumps(line, ensure_ascii=False) + "\n").encode("utf-8", "surrogatepass")


@dataclass(frozen=True)
class Outcome:
    """What a batch gave for one request: a chat completion body (HTTP 200), or an error."""

    body: dict[str, Any] | None = None
    status: int | None = None
    error: str | None = None
    code: str | None = None
    batch_id: str | None = None

    @property
    def ok(self) -> bool:
        return self.body is not None


def _message(error: Any) -> tuple[str | None, str | None]:
    """(message, code) of an error as the files give it: OpenAI's `{"code", "message"}`, vLLM's
    ErrorResponse (`{"error": {...}}` or flat), or a bare string."""
    if isinstance(error, dict):
        inner = error.get("error", error)
        if isinstance(inner, dict):
            message = inner.get("message")
            code = inner.get("code")
            return (str(message) if message is not None else json.dumps(inner)), (None if code is None else str(code))
        return str(inner), None
    if error is None:
        return None, None
    return str(error), None


def outcome_of(line: Any, batch_id: str | None = None) -> tuple[str, Outcome] | None:
    """(custom_id, outcome) of one line of an output or error file; None for a line of another shape."""
    if not isinstance(line, dict) or not isinstance(line.get("custom_id"), str):
        return None
    response: dict[str, Any] = line["response"] if isinstance(line.get("response"), dict) else {}
    status = response.get("status_code")
    status = status if isinstance(status, int) and not isinstance(status, bool) else None
    body = response.get("body")
    error = line.get("error")
    if error is None and status == 200 and isinstance(body, dict):
        return line["custom_id"], Outcome(body=body, status=200, batch_id=batch_id)
    message, code = _message(error)
    if message is None and isinstance(body, dict):
        message, code = _message(body)
    if message is None:
        message = f"HTTP {status}" if status is not None else "no response"
    return line["custom_id"], Outcome(status=status, error=message, code=code, batch_id=batch_id)


def read_outcomes(path: str | os.PathLike, batch_id: str | None = None) -> dict[str, Outcome]:
    """The outcomes of a batch output or error file by custom_id (a reply wins over an error for the
    same id); EvalError naming the line for one that is not a batch output line (a torn last line
    of a download in progress is not skipped: the file must be whole)."""
    outcomes: dict[str, Outcome] = {}
    with open(path, encoding="utf-8", errors="surrogateescape") as handle:
        for number, text in enumerate(handle, 1):
            if not text.strip():
                continue
            try:
                found = outcome_of(json.loads(text), batch_id)
            except ValueError:
                found = None
            if found is None:
                raise EvalError(f"{path}:{number}: not a batch output line (JSON with custom_id and response)")
            custom_id, outcome = found
            if outcome.ok or custom_id not in outcomes:
                outcomes[custom_id] = outcome
    return outcomes


def outcome_record(item: EvalItem, recipe: EvalRecipe, outcome: Outcome, config: EvalConfig) -> dict[str, Any]:
    """The fields of the row's record besides `base | base_record`: its graded reply (latency
    unknown: the batch ran it), or a row error whose check says why."""
    where = {} if outcome.batch_id is None else {"batch_id": outcome.batch_id}
    if outcome.ok:
        try:
            result = completion_from_body(outcome.body)
        except ChatError as exc:
            return {"status": STATUS_ERROR, "check": "request", "error": str(exc), "http_status": 200, "attempts": 1}
        return scored_record(item, recipe, result, config.strip_think) | {"latency_s": None} | where
    message = outcome.error or "failed"
    if outcome.code == EXPIRED:
        check = EXPIRED
    elif outcome.code in (BATCH_FAILED, NOT_IN_RESULTS, TOO_LARGE):
        check = outcome.code
    else:
        check = "prompt_too_long" if is_prompt_too_long(outcome.status, message) else "request"
    fields: dict[str, Any] = {"status": STATUS_ERROR, "check": check, "error": message, "attempts": 1}
    return fields | ({} if outcome.status is None else {"http_status": outcome.status}) | where


@dataclass
class PassCounts:
    """What one walk of the data did: the records written by kind, the outcomes graded."""

    stats: RunStats = field(default_factory=RunStats)
    used: set[str] = field(default_factory=set)  # the digests whose outcome was graded


def plan_pass(
    config: EvalConfig,
    recipes: Sequence[EvalRecipe],
    files: list[str],
    shas: dict[str, str],
    records: list[dict],
    base: dict,
    too_long: Mapping[tuple[str, int], int] | None,
    *,
    outcomes: Mapping[str, Outcome],
    waiting: Container[str],
    emit: Callable[[dict], None],
    request: Callable[[EvalItem], None],
) -> tuple[Planner, PassCounts]:
    """Walk the rows as a fresh run would (`Planner`): write the records it decides, grade each row
    to be sent whose digest has an outcome, leave those `waiting` for a batch, and hand every other
    to `request`. CPU work (parsing, tokenizing, grading): call it off the event loop."""
    planner = Planner(config, recipes, files, shas, records, base, dict(too_long) if too_long is not None else None)
    counts = PassCounts()
    stats = counts.stats
    for kind, payload in planner:
        if kind != JOB:
            stats.count(kind, payload)
            emit(payload)
            continue
        for item in payload:
            outcome = outcomes.get(item.digest)
            if outcome is not None:
                recipe = recipe_named(item.recipe, recipes)
                fields = outcome_record(item, recipe, outcome, config)
                ok = fields["status"] != STATUS_ERROR
                stats.scored += ok
                stats.errors += not ok
                counts.used.add(item.digest)
                emit(base | base_record(item, recipe, shas[item.source], tokenizer=config.tokenizer_spec) | fields)
            elif item.digest not in waiting:
                request(item)
    stats.resumed = planner.resumed
    return planner, counts


@dataclass
class OpenRun:
    """A run folder held by this command: the previous run.json, the config with its stored prices,
    the data files with their sha256, and what the Planner needs."""

    config: EvalConfig
    out: Path
    files: list[str]
    shas: dict[str, str]
    previous: dict | None
    base: dict

    def records(self) -> list[dict]:
        return read_results(self.out / RESULTS_NAME)

    def walk(
        self, recipes: Sequence[EvalRecipe], too_long: Sequence[Any] | None, **handlers: Any
    ) -> tuple[Planner, PassCounts]:
        """`plan_pass` over this run folder's files and results (`handlers`: its keyword arguments)."""
        over_window = _over_window(too_long)
        return plan_pass(
            self.config, recipes, self.files, self.shas, self.records(), self.base, over_window, **handlers
        )

    def write_run(self, *, finished: bool, selection: dict, extra: Callable[[dict], dict] | None = None) -> None:
        record = run_record(self.config, self.previous, self.shas, finished=finished, selection=selection)
        _write_run_file(self.out, extra(record) if extra is not None else record)


@contextlib.contextmanager
def open_run(config: EvalConfig, *, run_extra: Callable[[dict], dict] | None = None) -> Iterator[OpenRun]:
    """Hold RUN_DIR as the online runner holds it (run.lock), refuse other settings (EvalError),
    and write run.json as not finished before anything is sent."""
    with locked_run_folder(config) as (files, out):
        previous = _read_run_file(out)
        settings = config.settings()
        _check_settings(out, previous, settings)
        config = with_stored_prices(config, previous)
        shas = {path: file_sha256(path) for path in files}
        opened = OpenRun(config, out, files, shas, previous, {"settings": settings_fingerprint(settings)})
        try:
            opened.write_run(finished=False, selection={"files": files}, extra=run_extra)
        except OSError as exc:
            raise EvalError(f"cannot write the run directory {out}: {exc.strerror or exc}") from None
        yield opened


def _over_window(too_long: Sequence[Any] | None) -> dict[tuple[str, int], int] | None:
    return None if too_long is None else {(t.file, t.row): t.prompt_tokens for t in too_long}


class ExportStats(RunStats):
    requests: int = 0
    duplicates: int = 0  # rows whose content another selected row has: one request serves both
    bytes: int = 0
    unreadable: list[str] = Field(default_factory=list)


def export_requests(
    config: EvalConfig,
    output: str | os.PathLike,
    *,
    recipes: Sequence[EvalRecipe],
    too_long: Sequence[Any] | None = None,
) -> ExportStats:
    """Write the batch input file of the rows `config` selects (its filters and window), one request
    per distinct row content, as `mrcr-eval --batch` would send them; nothing else is written."""
    files = resolve_inputs(config.data)
    for path in files:
        if not Path(path).is_file():
            raise EvalError(f"data file not found: {path}")
    shas = {path: file_sha256(path) for path in files}
    base = {"settings": settings_fingerprint(config.settings())}
    stats = ExportStats()
    seen: set[str] = set()
    with atomic_path(output) as tmp, open(tmp, "wb") as handle:

        def request(item: EvalItem) -> None:
            if item.digest in seen:
                stats.duplicates += 1
                return
            seen.add(item.digest)
            data = encoded_line(request_line(item, recipe_named(item.recipe, recipes), config))
            handle.write(data)
            stats.requests += 1
            stats.bytes += len(data)

        planner, counts = plan_pass(
            config,
            recipes,
            files,
            shas,
            [],
            base,
            _over_window(too_long),
            outcomes={},
            waiting=(),
            emit=lambda record: None,
            request=request,
        )
    stats.skipped, stats.errors, stats.file_errors = counts.stats.skipped, counts.stats.errors, counts.stats.file_errors
    stats.unreadable = planner.unreadable
    return stats


class ImportStats(RunStats):
    results: int = 0  # lines of the results file
    unused: int = 0  # of them, those graded into no row now (rows done before, or not selected)


def import_results(
    config: EvalConfig,
    results: str | os.PathLike,
    *,
    recipes: Sequence[EvalRecipe],
    on_record: Callable[[dict], None] | None = None,
    too_long: Sequence[Any] | None = None,
) -> ImportStats:
    """Grade a batch output file (OpenAI's or `vllm run-batch`'s) into the run folder `config.out`,
    as an online run of the same rows would record them; a selected row without a line in it is
    a row error (`not_in_results`), which a later import of another results file can fill.
    EvalError for a line that is not a batch output line, or replies of another model."""
    config = config.model_copy(update={"batch": "file", "base_url": OFFLINE})
    try:
        outcomes = read_outcomes(results)
    except OSError as exc:
        raise EvalError(f"cannot read {results}: {exc.strerror or exc}") from None
    models = {str(o.body["model"]) for o in outcomes.values() if o.ok and o.body and o.body.get("model")}
    if models - {config.model}:
        raise EvalError(f"{results} holds replies of {', '.join(sorted(models))}, not of --model {config.model}")
    stats = ImportStats(results=len(outcomes))
    with open_run(config) as run, ResultsWriter(run.out / RESULTS_NAME) as writer:

        def emit(record: dict) -> None:
            writer.write(record)
            if on_record is not None:
                on_record(record)

        def missing(item: EvalItem) -> None:
            recipe = recipe_named(item.recipe, recipes)
            outcome = Outcome(error=f"no line with custom_id {item.digest} in {results}", code=NOT_IN_RESULTS)
            stats.errors += 1
            emit(
                run.base
                | base_record(item, recipe, run.shas[item.source], tokenizer=config.tokenizer_spec)
                | outcome_record(item, recipe, outcome, config)
            )

        planner, counts = run.walk(recipes, too_long, outcomes=outcomes, waiting=(), emit=emit, request=missing)
        run.write_run(finished=True, selection=planner.selection())
    stats.scored, stats.skipped, stats.resumed = counts.stats.scored, counts.stats.skipped, counts.stats.resumed
    stats.errors += counts.stats.errors
    stats.file_errors = counts.stats.file_errors
    stats.unused = len(set(outcomes) - counts.used)
    return stats
