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
import os
from collections.abc import Callable, Container, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import Field

from .._files import atomic_path, file_sha256
from .._openai import ChatError, completion_from_body, is_prompt_too_long
from .._usage import batch_price
from ..batch import (
    BATCH_FAILED,
    EXPIRED,
    NOT_IN_RESULTS,
    TOO_LARGE,
    BatchError,
    Outcome,
    OutputRead,
    encoded_line,
    read_output,
    reply_models,
    same_model,
)
from ..batch import request_line as batch_request_line
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

#: The `base_url` of the settings of a run graded from a results file (no server was asked).
OFFLINE = "offline"


def request_line(item: EvalItem, recipe: EvalRecipe, config: EvalConfig) -> dict[str, Any]:
    """One line of a batch input file: the body the online runner sends for this row (what a
    `--control` keeps of its messages, its `--extra-body` merged in as the client merges it),
    keyed by the row digest."""
    params = config.request_params()
    extra = params.pop("extra_body", None) or {}
    messages = sent_messages(item, recipe, config.control)
    return batch_request_line(item.digest, {"model": config.model, "messages": messages, **params, **extra})


def batch_priced(record: dict[str, Any]) -> dict[str, Any]:
    """run.json of replies from the Batch API: every price at the batch discount, the list price beside it."""
    price = record.get("price_per_1m")
    if not isinstance(price, dict):
        return record
    return record | {"price_per_1m": batch_price(price)}


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
    waiting: dict[str, int] = field(default_factory=dict)  # bin -> selected rows still in a batch


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
            else:
                label = recipe_named(item.recipe, recipes).bin_label(item.bin_upper)
                counts.waiting[label] = counts.waiting.get(label, 0) + 1
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
    per distinct row content, as `mrcr-eval --batch` would send them; nothing else is written.
    EvalError, and no file, when a data file cannot be read or no row can be sent."""
    files = resolve_inputs(config.data)
    for path in files:
        if not Path(path).is_file():
            raise EvalError(f"data file not found: {path}")
    shas = {path: file_sha256(path) for path in files}
    base = {"settings": settings_fingerprint(config.settings())}
    stats = ExportStats()
    seen: set[str] = set()
    refused: list[dict] = []  # error records: unreadable files and rows that cannot be sent
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
            emit=lambda record: refused.append(record) if record.get("status") == STATUS_ERROR else None,
            request=request,
        )
        _refuse_export(refused, stats.requests)  # before the file is in place: nothing is written
    stats.skipped, stats.errors, stats.file_errors = counts.stats.skipped, counts.stats.errors, counts.stats.file_errors
    stats.unreadable = planner.unreadable
    return stats


def _refuse_export(refused: list[dict], requests: int) -> None:
    """EvalError for an export with an unreadable file, or with no request at all (why, in one line)."""
    files = [r for r in refused if r.get("check") == "file"]
    if files:
        more = f" (and {len(files) - 1} more unreadable files)" if len(files) > 1 else ""
        raise EvalError(f"{files[0]['error']}{more}")
    if requests:
        return
    if not refused:
        raise EvalError("nothing to export: no row of the data files is selected")
    first = refused[0]
    raise EvalError(
        f"nothing to export: none of the {len(refused)} selected rows can be sent "
        f"({first['file']} row {first['row']}: {first.get('error')})"
    )


class ImportStats(RunStats):
    results: int = 0  # custom ids answered in the results file
    unused: int = 0  # of them, those graded into no row now (rows done before, or not selected)
    problems: list[str] = Field(default_factory=list)  # torn, duplicated and conflicting lines


#: The settings of `--needles`, `--bin`, `--limit`, `--per-bin` and `--max-context-window`
#: cleared: every row of the data files, whose digests are the request set of any export.
_EVERY_ROW = {"needles": None, "bins": None, "limit": None, "per_bin": None, "max_context_window": None}


def request_ids(config: EvalConfig, recipes: Sequence[EvalRecipe]) -> set[str]:
    """The custom ids of every request an export of these data files could hold (any selection)."""
    ids: set[str] = set()
    export_config = config.model_copy(update=_EVERY_ROW)
    files = resolve_inputs(config.data)
    shas = {path: file_sha256(path) for path in files}
    base = {"settings": settings_fingerprint(export_config.settings())}
    plan_pass(
        export_config, recipes, files, shas, [], base, None,
        outcomes={}, waiting=(), emit=lambda record: None, request=lambda item: ids.add(item.digest),
    )  # fmt: skip
    return ids


def read_results_file(config: EvalConfig, results: str | os.PathLike, recipes: Sequence[EvalRecipe]) -> OutputRead:
    """The replies of a results file, checked before anything is written: EvalError for a file
    that is not readable, a request file, a file of no output line, replies of another model than
    `config.model` (a dated snapshot of it is the same model), or custom ids that no row of the
    data files has."""
    try:
        read = read_output(results)
    except OSError as exc:
        raise EvalError(f"cannot read {results}: {exc.strerror or exc}") from None
    except BatchError as exc:
        raise EvalError(str(exc)) from None
    if read.torn and not read.outcomes:
        raise EvalError(
            f"{read.torn[0]}: not a batch output line (JSON with custom_id and response): not an output file?"
        )
    others = sorted(m for m in reply_models(read) if not same_model(m, config.model))
    if others:
        raise EvalError(f"{results} holds replies of {', '.join(others)}, not of --model {config.model}")
    foreign = read.foreign_to(request_ids(config, recipes))
    if foreign:
        more = f" (and {len(foreign) - 1} more)" if len(foreign) > 1 else ""
        raise EvalError(
            f"{results} answers custom_id {foreign[0]}{more}, which no row of the data files has: "
            "the results of another request set?"
        )
    return read


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
    Replies of the OpenAI Batch API (line ids `batch_req_...`) are priced at its discount.
    Torn lines are reported (`problems`) and the other replies graded; EvalError (nothing written)
    for what `read_results_file` refuses."""
    config = config.model_copy(update={"batch": "file", "base_url": OFFLINE})
    read = read_results_file(config, results, recipes)
    outcomes = read.outcomes
    stats = ImportStats(results=len(outcomes), problems=read.problems())
    priced = batch_priced if read.batch_api else None  # the Batch API billed these replies at its discount
    with open_run(config, run_extra=priced) as run, ResultsWriter(run.out / RESULTS_NAME) as writer:

        def emit(record: dict) -> None:
            writer.write(record)
            if on_record is not None:
                on_record(record)

        def missing(item: EvalItem) -> None:
            recipe = recipe_named(item.recipe, recipes)
            why = "unreadable or absent" if read.torn else "no line"
            outcome = Outcome(error=f"{why}: custom_id {item.digest} in {results}", code=NOT_IN_RESULTS)
            stats.errors += 1
            emit(
                run.base
                | base_record(item, recipe, run.shas[item.source], tokenizer=config.tokenizer_spec)
                | outcome_record(item, recipe, outcome, config)
            )

        planner, counts = run.walk(recipes, too_long, outcomes=outcomes, waiting=(), emit=emit, request=missing)
        run.write_run(finished=True, selection=planner.selection(), extra=priced)
    stats.scored, stats.skipped, stats.resumed = counts.stats.scored, counts.stats.skipped, counts.stats.resumed
    stats.errors += counts.stats.errors
    stats.file_errors = counts.stats.file_errors
    stats.unused = len(set(outcomes) - counts.used)
    return stats
