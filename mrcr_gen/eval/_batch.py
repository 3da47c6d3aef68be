"""`mrcr-eval --batch`: the rows sent through the OpenAI Batch API, graded into an ordinary run folder.

The rows to send (decided by the `Planner`, as an online run decides them) are written as batch
input files (`_batchfile.request_line`, one request per distinct row content) through the core's
batch machinery (`mrcr_gen.batch.BatchFolder`: split so that no file exceeds the API's limits,
uploaded, each made a batch with a 24h window, polled, collected); this module is its consumer:
what a row sends and how each outcome becomes a record. The batches' output and error files are
downloaded into RUN_DIR/batches/ and graded under the online policy: every HTTP-200 reply graded
as returned, a request that failed or expired (or that its failed batch never ran, or whose line
is torn) a row error, which counts 0 and which a rerun sends again; what was wrong with the files
is in `BatchStats.problems`, which the command prints.

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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from pydantic import Field

from .._openai import ChatError, api_call, is_fatal
from ..batch import TOO_LARGE, BatchError, BatchFolder, BatchLimits, KeptReplies, Outcome, PartWriter, encoded_line
from ._batchfile import OpenRun, batch_priced, open_run, outcome_record, request_line
from ._config import EvalConfig, EvalError, EvalFatal
from ._items import EvalItem, EvalRecipe, recipe_named
from ._planner import Planner, base_record
from ._results import BATCH_DIR, RESULTS_NAME, ResultsWriter
from ._runner import RunStats, eval_client
from ._session import close_client


class BatchStats(RunStats):
    batches_submitted: int = 0
    requests_submitted: int = 0
    batches_pending: int = 0  # still running when the command ended (--no-wait)
    requests_waiting: int = 0
    problems: list[str] = Field(default_factory=list)  # torn, duplicated, conflicting lines


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
    keep_files: bool = False,
) -> BatchStats:
    """Evaluate through the OpenAI Batch API (see the module docstring); returns the counts of this
    invocation. Writes results.jsonl, run.json and RUN_DIR/batches/; `write_report` writes the summary.
    `wait=False` submits, collects what has ended and returns (run.json not finished while batches
    run); `keep_files` keeps the batches' files in the account. Raises EvalError for bad input or
    changed settings, EvalFatal when the API refused for good (an unknown model: before any upload)."""
    config = config.model_copy(update={"batch": "api"})
    with contextlib.ExitStack() as held:
        run = await asyncio.to_thread(held.enter_context, open_run(config, run_extra=batch_priced))
        try:
            batches = BatchFolder(run.out / BATCH_DIR, limits, label="mrcr_eval_part", keep_files=keep_files)
        except BatchError as exc:
            raise EvalError(f"{exc}; choose another --out") from None
        await asyncio.to_thread(batches.drop_unsent)  # rebuilt for this command's selection
        client = client if client is not None else eval_client(config, api_key)
        writer = held.enter_context(ResultsWriter(run.out / RESULTS_NAME))
        batch = _BatchRun(config, recipes, run, batches, writer, on_record)
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
        batches: BatchFolder,
        writer: ResultsWriter,
        on_record: Callable[[dict], None] | None,
    ):
        self.config = config
        self.recipes = recipes
        self.run = run
        self.batches = batches
        self.writer = writer
        self.on_record = on_record
        self.stats = BatchStats()
        self.attempted: set[str] = set()  # sent or graded by this command: never sent again by it
        self.model_checked = False
        self.pending_bins: dict[str, int] = {}  # bin -> rows of the selection still in a batch

    def emit(self, record: dict) -> None:
        self.writer.write(record)
        if self.on_record is not None:
            self.on_record(record)

    def request(self, parts: PartWriter, item: EvalItem) -> None:
        """Add a row's request to the batch files; an error record when it is too large for one."""
        if item.digest in self.attempted:
            return
        self.attempted.add(item.digest)
        config = self.config
        recipe = recipe_named(item.recipe, self.recipes)
        data = encoded_line(request_line(item, recipe, config))
        if not parts.add(item.digest, data):
            outcome = Outcome(
                error=f"the request is {len(data)} bytes, over the {self.batches.limits.max_bytes} of a batch file",
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
            if any(part.batch_id is None for part in self.batches.state.parts):
                await self.check_model(client)
            batches, requests = await self.batches.submit(client, max_retries=max_retries)
            self.stats.batches_submitted += batches
            self.stats.requests_submitted += requests
            if not self.batches.pending() or (polled and not wait):
                return planner
            await self.batches.poll(client, wait=wait, max_retries=max_retries, on_status=on_status)
            polled = True

    async def check_model(self, client: Any) -> None:
        """Before anything is uploaded: EvalFatal when the account's model list (when the server
        gives one) does not have the model, as an online run stops at its first reply."""
        if self.model_checked:
            return
        self.model_checked = True
        try:
            page = await api_call(client.models.list, max_retries=self.config.max_retries)
        except ChatError:
            return  # a server without a model list: its batch lines will say
        listed = {str(getattr(model, "id", "")) for model in getattr(page, "data", None) or []}
        if listed and self.config.model not in listed:
            raise EvalFatal(f"the Batch API refused: model {self.config.model!r} is not among the account's models")

    async def walk(self, too_long: Sequence[Any] | None, *, first_pass: bool) -> Planner:
        """One walk of the data: the ended batches' outcomes graded and recorded (a reply of an
        earlier batch reused for a row that has none), new requests written to batch files;
        returns its planner. EvalFatal, nothing recorded, when a batch was refused for good."""
        batches = self.batches
        ended = await asyncio.to_thread(batches.ended)
        _refused_for_good(ended.outcomes.values())
        self.stats.problems += ended.problems
        waiting = await asyncio.to_thread(batches.waiting_ids)
        parts = batches.writer()
        planner, counts = await asyncio.to_thread(
            self.run.walk,
            self.recipes,
            too_long,
            outcomes=Replies(ended.outcomes, batches.kept()),
            waiting=waiting,
            emit=self.emit,
            request=functools.partial(self.request, parts),
        )
        await asyncio.to_thread(parts.close)
        self.attempted |= counts.used
        await asyncio.to_thread(batches.mark_recorded, ended.parts)
        for name in ("scored", "errors", "skipped", "file_errors"):
            setattr(self.stats, name, getattr(self.stats, name) + getattr(counts.stats, name))
        if first_pass:  # later passes find this command's own grades done
            self.stats.resumed = counts.stats.resumed
        self.pending_bins = counts.waiting
        return planner

    def finish(self, planner: Planner) -> None:
        """The counts of what is still out, and run.json (finished once no batch is pending)."""
        pending = self.batches.pending()
        self.stats.batches_pending = len(pending)
        self.stats.requests_waiting = sum(part.requests for part in pending)
        self.stats.sent = self.stats.requests_submitted
        self.stats.problems += self.batches.notes
        waiting = {"batches": len(pending), "rows": sum(self.pending_bins.values()), "by_bin": self.pending_bins}

        def extra(record: dict[str, Any]) -> dict[str, Any]:
            return batch_priced(record) | ({"pending": waiting} if pending else {})

        self.run.write_run(finished=not pending, selection=planner.selection(), extra=extra)


class Replies(Mapping[str, Outcome]):
    """The outcomes a walk grades: those of the batches that just ended, else a reply an earlier
    batch gave for the same content (a row outside an earlier, narrower selection; a row of the
    same content as one graded)."""

    def __init__(self, ended: Mapping[str, Outcome], kept: KeptReplies):
        self.ended, self.kept = ended, kept

    def __getitem__(self, custom_id: str) -> Outcome:
        outcome = self.ended.get(custom_id)
        if outcome is None or not outcome.ok:
            outcome = self.kept.get(custom_id) or outcome
        if outcome is None:
            raise KeyError(custom_id)
        return outcome

    def __iter__(self) -> Iterator[str]:
        return iter(self.ended)

    def __len__(self) -> int:
        return len(self.ended)


def _refused_for_good(outcomes: Iterable[Outcome]) -> None:
    """EvalFatal for a batch line refused as an online request is refused for good (bad key,
    forbidden, unknown model): nothing is recorded, so a rerun says so again and sends nothing."""
    for outcome in outcomes:
        if not outcome.ok and is_fatal(outcome.status, outcome.error or ""):
            raise EvalFatal(f"the Batch API refused: {outcome.error}")


__all__ = ["BatchLimits", "BatchStats", "batch_priced", "run_batch_async"]
