"""`mrcr-eval --batch`: the rows sent through the OpenAI Batch API, graded into an ordinary run folder.

The rows to send (decided by the `Planner`, as an online run decides them) are written as batch
input files (`_batchfile.request_line`, one request per distinct row content), split so that no
file exceeds the API's limits (`BatchLimits`: 50,000 requests, 200 MB), uploaded, and each made a
batch with a 24h window. The batches are polled with a growing interval until they end; their
output and error files are downloaded into RUN_DIR/batches/ and graded under the online policy:
every HTTP-200 reply graded as returned, a request that failed or expired (or that its failed
batch never ran) a row error, which counts 0 and which a rerun sends again.

Resumable: RUN_DIR/batches/batches.json records every batch (its local part, uploaded file id,
batch id, status, downloaded files), written before and after each API call that creates
something. A rerun polls the batches it already made and sends only rows that are in none of
them and have no result; a file uploaded by a run killed before it made the batch is looked up
among the account's recent batches before a batch is made of it. run.json prices the run at the
batch discount (`price_per_1m` halved, `batch_discount` and the list price beside it).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from .._files import atomic_path, write_text_atomic
from .._openai import ChatError, api_call
from ._batchfile import (
    BATCH_FAILED,
    CHAT_URL,
    EXPIRED,
    TOO_LARGE,
    OpenRun,
    Outcome,
    encoded_line,
    open_run,
    outcome_record,
    read_outcomes,
    request_line,
)
from ._config import EvalConfig, EvalError, EvalFatal
from ._items import EvalItem, EvalRecipe, recipe_named
from ._planner import Planner, base_record
from ._results import BATCH_DIR, RESULTS_NAME, ResultsWriter
from ._runner import RunStats, eval_client
from ._session import close_client

#: The Batch API's limits on one input file (https://platform.openai.com/docs/guides/batch).
MAX_BATCH_REQUESTS = 50_000
MAX_BATCH_BYTES = 200_000_000
COMPLETION_WINDOW = "24h"
#: What the Batch API takes off the list price.
BATCH_DISCOUNT = 0.5
#: Seconds before the first status check of the batches; the interval doubles up to the cap.
POLL_FIRST_S = 10.0
POLL_CAP_S = 600.0
STATE_NAME = "batches.json"
TERMINAL = frozenset({"completed", "expired", "failed", "cancelled"})


@dataclass(frozen=True)
class BatchLimits:
    """How the rows are split into batches and how often they are polled (tests make them small)."""

    max_requests: int = MAX_BATCH_REQUESTS
    max_bytes: int = MAX_BATCH_BYTES
    poll_first_s: float = POLL_FIRST_S
    poll_cap_s: float = POLL_CAP_S


class Part(BaseModel):
    """One batch: its requests in RUN_DIR/batches/NAME.requests.jsonl (until the batch is made) and
    their custom ids in NAME.ids, then what the API said of it and the files downloaded."""

    name: str
    requests: int
    bytes: int
    input_file_id: str | None = None
    batch_id: str | None = None
    status: str | None = None
    failure: str | None = None  # why the batch failed (its `errors`), if it did
    output: str | None = None  # the downloaded output file, in RUN_DIR/batches/
    errors: str | None = None  # the downloaded error file
    done: bool = False  # ended, and its files are downloaded
    graded: bool = False  # its outcomes are in results.jsonl


class BatchState(BaseModel):
    parts: list[Part] = []


class BatchStats(RunStats):
    batches_submitted: int = 0
    requests_submitted: int = 0
    batches_pending: int = 0  # still running when the command ended (--no-wait)
    requests_waiting: int = 0


def batch_priced(record: dict[str, Any]) -> dict[str, Any]:
    """run.json of a Batch API run: every price at the batch discount, the list price beside it."""
    price = record.get("price_per_1m")
    if not isinstance(price, dict):
        return record
    discounted = {name: value * (1 - BATCH_DISCOUNT) for name, value in price.items() if isinstance(value, int | float)}
    return record | {"price_per_1m": discounted | {"batch_discount": BATCH_DISCOUNT, "list": price}}


def _load_state(folder: Path) -> BatchState:
    path = folder / STATE_NAME
    if not path.exists():
        return BatchState()
    try:
        return BatchState.model_validate_json(path.read_text(encoding="utf-8"))
    except (ValueError, ValidationError, OSError):
        raise EvalError(f"{path} is not a batch record this mrcr-eval can read; choose another --out") from None


def _save_state(folder: Path, state: BatchState) -> None:
    write_text_atomic(folder / STATE_NAME, state.model_dump_json(indent=2) + "\n")


def _ids_path(folder: Path, part: Part) -> Path:
    return folder / f"{part.name}.ids"


def _requests_path(folder: Path, part: Part) -> Path:
    return folder / f"{part.name}.requests.jsonl"


class _PartWriter:
    """Writes the requests of one pass into parts no larger than the limits (called from the
    pass's thread); `close` puts the last one in place and records every part in the state."""

    def __init__(self, folder: Path, state: BatchState, limits: BatchLimits):
        self.folder, self.state, self.limits = folder, state, limits
        self.made: list[Part] = []
        self._handle: Any = None
        self._ids: list[str] = []
        self._bytes = 0

    def _finish(self) -> None:
        if self._handle is None:
            return
        self._handle.close()
        part = Part(name=self._name, requests=len(self._ids), bytes=self._bytes)
        write_text_atomic(_ids_path(self.folder, part), "".join(f"{i}\n" for i in self._ids))
        Path(self._partial).replace(_requests_path(self.folder, part))
        self.state.parts.append(part)
        _save_state(self.folder, self.state)
        self.made.append(part)
        self._handle, self._ids, self._bytes = None, [], 0

    def add(self, digest: str, data: bytes) -> bool:
        """Add one request line; False when it alone is over the byte limit (it is not written)."""
        if len(data) > self.limits.max_bytes:
            return False
        if self._handle is not None and (
            len(self._ids) >= self.limits.max_requests or self._bytes + len(data) > self.limits.max_bytes
        ):
            self._finish()
        if self._handle is None:
            self.folder.mkdir(parents=True, exist_ok=True)
            self._name = f"part-{len(self.state.parts) + 1:04d}"
            self._partial = self.folder / f".{self._name}.requests.jsonl.partial"
            self._handle = open(self._partial, "wb")  # noqa: SIM115 - closed in _finish
        self._handle.write(data)
        self._ids.append(digest)
        self._bytes += len(data)
        return True

    def close(self) -> list[Part]:
        self._finish()
        return self.made


def _waiting_ids(folder: Path, state: BatchState) -> set[str]:
    """The custom ids of every batch that has not ended (or not been made) yet."""
    waiting: set[str] = set()
    for part in state.parts:
        if not part.done:
            waiting.update(_ids_path(folder, part).read_text(encoding="utf-8").split())
    return waiting


def _ended_outcomes(folder: Path, state: BatchState) -> tuple[dict[str, Outcome], list[Part]]:
    """The outcomes of the batches that ended and are not graded yet (a reply wins over an error),
    a row error for each of their requests that neither file has; and those parts."""
    outcomes: dict[str, Outcome] = {}
    parts = [part for part in state.parts if part.done and not part.graded]
    for part in parts:
        found: dict[str, Outcome] = {}
        for name in (part.errors, part.output):  # the output last: a reply wins
            if name is not None:
                found.update(read_outcomes(folder / name, part.batch_id))
        expired = part.status == "expired"
        lost = Outcome(
            error="the batch expired before this request ran"
            if expired
            else f"batch {part.batch_id} {part.status}{f': {part.failure}' if part.failure else ''}; "
            "the request did not run",
            code=EXPIRED if expired else BATCH_FAILED,
            batch_id=part.batch_id,
        )
        for custom_id in _ids_path(folder, part).read_text(encoding="utf-8").split():
            outcome = found.get(custom_id, lost)
            if custom_id not in outcomes or outcome.ok:
                outcomes[custom_id] = outcome
    return outcomes, parts


async def _download(client: Any, file_id: str, target: Path, max_retries: int) -> str:
    async def fetch() -> None:
        async with client.files.with_streaming_response.content(file_id) as response:
            with atomic_path(target) as tmp, open(tmp, "wb") as handle:
                async for chunk in response.iter_bytes():
                    handle.write(chunk)

    await api_call(fetch, max_retries=max_retries)
    return target.name


async def _adopted(client: Any, input_file_id: str, max_retries: int) -> Any:
    """The batch already made of this uploaded file (by a run killed before it recorded it), if any
    of the account's 100 latest batches is."""
    page = await api_call(lambda: client.batches.list(limit=100), max_retries=max_retries)
    return next((batch for batch in page.data if batch.input_file_id == input_file_id), None)


async def _upload(client: Any, path: Path) -> Any:
    return await client.files.create(file=path, purpose="batch")


async def _create(client: Any, part: Part) -> Any:
    return await client.batches.create(
        input_file_id=part.input_file_id,
        endpoint=CHAT_URL,
        completion_window=COMPLETION_WINDOW,
        metadata={"mrcr_eval_part": part.name},
    )


async def _retrieve(client: Any, batch_id: str) -> Any:
    return await client.batches.retrieve(batch_id)


async def _submit(client: Any, folder: Path, state: BatchState, stats: BatchStats, max_retries: int) -> None:
    """Upload each part not uploaded yet and make each uploaded part a batch, recording each id at once."""
    for part in state.parts:
        if part.batch_id is not None:
            continue
        adopted: Any = None
        if part.input_file_id is None:
            upload = functools.partial(_upload, client, _requests_path(folder, part))
            uploaded = await api_call(upload, max_retries=max_retries)
            part.input_file_id = uploaded.id
            _save_state(folder, state)
        else:
            adopted = await _adopted(client, part.input_file_id, max_retries)
        batch: Any = adopted
        if batch is None:
            batch = await api_call(functools.partial(_create, client, part), max_retries=max_retries)
        part.batch_id, part.status = batch.id, batch.status
        _save_state(folder, state)
        _requests_path(folder, part).unlink(missing_ok=True)  # the API holds it now
        if adopted is None:
            stats.batches_submitted += 1
            stats.requests_submitted += part.requests


def _failure(batch: Any) -> str | None:
    errors = getattr(getattr(batch, "errors", None), "data", None) or []
    messages = [f"{e.code}: {e.message}" if e.code else str(e.message) for e in errors]
    return "; ".join(messages) or None


async def _poll(
    client: Any,
    folder: Path,
    state: BatchState,
    limits: BatchLimits,
    *,
    wait: bool,
    max_retries: int,
    on_status: Callable[[str], None] | None,
) -> None:
    """Check every batch that has not ended, downloading the files of those that have; with `wait`,
    again (the interval doubling up to `poll_cap_s`) until all have ended."""
    delay = limits.poll_first_s
    while True:
        for part in state.parts:
            if part.done or part.batch_id is None:
                continue
            batch = await api_call(functools.partial(_retrieve, client, part.batch_id), max_retries=max_retries)
            part.status = batch.status
            if batch.status in TERMINAL:
                part.failure = _failure(batch)
                if batch.output_file_id:
                    target = folder / f"{part.name}.output.jsonl"
                    part.output = await _download(client, batch.output_file_id, target, max_retries)
                if batch.error_file_id:
                    target = folder / f"{part.name}.errors.jsonl"
                    part.errors = await _download(client, batch.error_file_id, target, max_retries)
                part.done = True
            _save_state(folder, state)
            if on_status is not None:
                counts = batch.request_counts
                done = f" ({counts.completed} done, {counts.failed} failed of {counts.total})" if counts else ""
                on_status(f"batch {part.batch_id} ({part.name}): {batch.status}{done}")
        if not wait or all(part.done for part in state.parts):
            return
        await asyncio.sleep(delay)
        delay = min(limits.poll_cap_s, delay * 2)


async def run_batch_async(
    config: EvalConfig,
    *,
    recipes: Sequence[EvalRecipe],
    api_key: str | None = None,
    client: Any = None,
    on_record: Callable[[dict], None] | None = None,
    on_status: Callable[[str], None] | None = None,
    too_long: Sequence[Any] | None = None,
    limits: BatchLimits = BatchLimits(),
    wait: bool = True,
) -> BatchStats:
    """Evaluate through the OpenAI Batch API (see the module docstring); returns the counts of this
    invocation. Writes results.jsonl, run.json and RUN_DIR/batches/; `write_report` writes the summary.
    `wait=False` submits, collects what has ended and returns (run.json not finished while batches
    run). Raises EvalError for bad input or changed settings, EvalFatal when the API refused for good."""
    config = config.model_copy(update={"batch": "api"})
    with contextlib.ExitStack() as held:
        run = await asyncio.to_thread(held.enter_context, open_run(config, run_extra=batch_priced))
        state = _load_state(run.out / BATCH_DIR)
        client = client if client is not None else eval_client(config, api_key)
        writer = held.enter_context(ResultsWriter(run.out / RESULTS_NAME))
        batch = _BatchRun(config, recipes, run, state, writer, limits, on_record)
        try:
            planner = await batch.passes(client, too_long, wait=wait, on_status=on_status)
        except ChatError as exc:
            if exc.fatal:
                raise EvalFatal(f"the Batch API refused: {exc}") from None
            raise EvalError(f"the Batch API failed: {exc} (rerun to continue: nothing is sent twice)") from None
        finally:
            await close_client(client)
        batch.finish(planner)
    return batch.stats


class _BatchRun:
    """One `--batch api` invocation at work: its run folder, the batches' state, the counts and
    the rows it sent or graded (never sent again by it)."""

    def __init__(
        self,
        config: EvalConfig,
        recipes: Sequence[EvalRecipe],
        run: OpenRun,
        state: BatchState,
        writer: ResultsWriter,
        limits: BatchLimits,
        on_record: Callable[[dict], None] | None,
    ):
        self.config = config
        self.recipes = recipes
        self.run = run
        self.folder = run.out / BATCH_DIR
        self.state = state
        self.writer = writer
        self.limits = limits
        self.on_record = on_record
        self.stats = BatchStats()
        self.attempted: set[str] = set()  # sent or graded by this command: never sent again by it

    def emit(self, record: dict) -> None:
        self.writer.write(record)
        if self.on_record is not None:
            self.on_record(record)

    def request(self, parts: _PartWriter, item: EvalItem) -> None:
        """Add a row's request to the batch files; an error record when it is too large for one."""
        if item.digest in self.attempted:
            return
        self.attempted.add(item.digest)
        config = self.config
        recipe = recipe_named(item.recipe, self.recipes)
        data = encoded_line(request_line(item, recipe, config))
        if not parts.add(item.digest, data):
            outcome = Outcome(
                error=f"the request is {len(data)} bytes, over the {self.limits.max_bytes} of a batch file",
                code=TOO_LARGE,
            )
            self.stats.errors += 1
            self.emit(
                self.run.base
                | base_record(item, recipe, self.run.shas[item.source], tokenizer=config.tokenizer_spec)
                | outcome_record(item, recipe, outcome, config)
            )

    async def passes(
        self, client: Any, too_long: Sequence[Any] | None, *, wait: bool, on_status: Callable[[str], None] | None
    ) -> Planner:
        """Walk the data, submit, poll, and again until every batch is done (or, `wait` false, once
        polled); the planner of the last walk."""
        max_retries = self.config.max_retries
        polled = False
        while True:
            planner = await self.walk(too_long, first_pass=not polled)
            await _submit(client, self.folder, self.state, self.stats, max_retries)
            pending = [part for part in self.state.parts if not part.done]
            if not pending or (polled and not wait):
                return planner
            await _poll(
                client, self.folder, self.state, self.limits, wait=wait, max_retries=max_retries, on_status=on_status
            )
            polled = True

    async def walk(self, too_long: Sequence[Any] | None, *, first_pass: bool) -> Planner:
        """One walk of the data: the ended batches' outcomes graded and recorded, new requests
        written to batch files; returns its planner."""
        folder, state = self.folder, self.state
        outcomes, ended = await asyncio.to_thread(_ended_outcomes, folder, state)
        waiting = await asyncio.to_thread(_waiting_ids, folder, state)
        parts = _PartWriter(folder, state, self.limits)
        planner, counts = await asyncio.to_thread(
            self.run.walk,
            self.recipes,
            too_long,
            outcomes=outcomes,
            waiting=waiting,
            emit=self.emit,
            request=functools.partial(self.request, parts),
        )
        await asyncio.to_thread(parts.close)
        self.attempted |= counts.used
        for part in ended:
            part.graded = True
        await asyncio.to_thread(_save_state, folder, state)
        for name in ("scored", "errors", "skipped", "file_errors"):
            setattr(self.stats, name, getattr(self.stats, name) + getattr(counts.stats, name))
        if first_pass:  # later passes find this command's own grades done
            self.stats.resumed = counts.stats.resumed
        return planner

    def finish(self, planner: Planner) -> None:
        """The counts of what is still out, and run.json (finished once no batch is pending)."""
        pending = [part for part in self.state.parts if not part.done]
        self.stats.batches_pending = len(pending)
        self.stats.requests_waiting = sum(part.requests for part in pending)
        self.stats.sent = self.stats.requests_submitted
        self.run.write_run(finished=not pending, selection=planner.selection(), extra=batch_priced)


__all__ = ["BatchLimits", "BatchStats", "batch_priced", "run_batch_async"]
