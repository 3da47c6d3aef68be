"""One `mrcr-eval` run at work (`Session`): the planner's steps sent, replied, graded and recorded.

The run's state (the counts, the requests in flight, the running tasks, a fatal answer, a task's
unexpected exception) lives here, and each thing the run does is one method: take the next step
(`dispatch`), send a job's rows in order (`_run_job`), ask the server (`_request`), record an
error (`_record_error`), grade a reply beside the requests (`_start_grading`), then await what is
in flight (`drain`) and let go of everything (`close`); `run` is that sequence.

The rules it keeps: a reply gives its slot to the next request at once and is graded by
`GradePool` (difflib is CPU work: never on the event loop); every task's exception is observed (a
crashed task stops the run and is raised at its end, never lost); on a stop, a fatal answer or an
interruption the requests in flight are awaited or cancelled before the results file closes, and
every reply is journaled before its slot is given back, so nothing is lost.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel

from .._openai import ChatError, ChatResult, ChatStopped, chat_completion, is_prompt_too_long, redact
from ._config import EvalConfig
from ._control import sent_messages
from ._items import EvalItem, EvalRecipe, recipe_named
from ._journal import ReplyJournal, reply_of
from ._pipeline import Backlog, GradePool, Prefetch
from ._planner import FILE_ERROR, GRADE, JOB, Planner, base_record, scored_record
from ._results import STATUS_ERROR, STATUS_SKIPPED, ResultsWriter


class RunStats(BaseModel):
    sent: int = 0
    scored: int = 0
    errors: int = 0
    skipped: int = 0
    resumed: int = 0
    file_errors: int = 0
    max_in_flight: int = 0

    def count(self, kind: str, record: dict) -> None:
        """Count a record the `Planner` wrote at once (a file error, a skipped row, a row error)."""
        if kind == FILE_ERROR:
            self.file_errors += 1
        elif record.get("status") == STATUS_SKIPPED:
            self.skipped += 1
        elif record.get("status") == STATUS_ERROR:
            self.errors += 1


def journal_key(record: dict) -> dict:
    """What names a journaled reply's row: its file, row, content and the run's settings."""
    return {name: record[name] for name in ("file", "row", "digest", "settings")}


class Session:
    """The state of one run between its first request and its last record (see the module docstring)."""

    def __init__(
        self,
        config: EvalConfig,
        recipes: Sequence[EvalRecipe],
        *,
        shas: dict[str, str],
        base: dict,
        client: Any,
        writer: ResultsWriter,
        journal: ReplyJournal,
        on_record: Callable[[dict], None] | None,
    ):
        self.config = config
        self.recipes = recipes
        self.shas = shas
        self.base = base  # the settings fingerprint every record carries
        self.client = client
        self.writer = writer
        self.journal = journal
        self.on_record = on_record
        self.params = config.request_params()
        self.stats = RunStats()
        self.semaphore = asyncio.Semaphore(config.concurrency)
        self.in_flight = 0
        self.jobs: set[asyncio.Task] = set()
        self.grading: set[asyncio.Task] = set()
        self.grader = GradePool()
        self.backlog = Backlog()
        self.fatal: list[ChatError] = []
        self.crashed: list[BaseException] = []  # a task's unexpected exception: observed, stops the run, raised

    def stopping(self) -> bool:
        return bool(self.fatal or self.crashed)

    def emit(self, record: dict) -> None:
        self.writer.write(record)
        if self.on_record is not None:
            self.on_record(record)

    # --- the steps of the plan -------------------------------------------------------------

    async def run(self, planner: Planner) -> bool:
        """Take the plan's steps, await what is in flight, let go of everything: whether every
        step was taken with nothing fatal and nothing crashed."""
        steps = Prefetch(iter(planner), depth=self.config.concurrency)  # reads ahead from now on, in its own thread
        try:
            finished = await self.dispatch(steps)
            await self.drain()
        finally:
            try:
                await self.close()
            finally:
                await steps.close()
                await close_client(self.client)
        return finished and not self.crashed and not self.fatal

    async def dispatch(self, steps: Prefetch) -> bool:
        """Take the planner's steps until they end (True) or the run stops (False), each job a
        task holding one of `concurrency` slots."""
        while not self.stopping():
            await self.semaphore.acquire()
            if self.stopping():
                self.semaphore.release()
                break
            step = await steps.next()
            if step is None:
                self.semaphore.release()
                return True
            await self._take(*step)
        return False

    async def _take(self, kind: str, payload: Any) -> None:
        """One step: a job runs as a task (its slot given back when it ends); a journaled reply is
        graded without a request; a record is written at once."""
        if kind == JOB:
            self._watch(self.jobs, asyncio.create_task(self._run_job(payload)), slot=True)
            return
        self.semaphore.release()
        if kind == GRADE:
            item, entry = payload
            await self.backlog.reserve(item)
            self._start_grading(item, *self._row_record(item), reply_of(entry))
        else:
            self.stats.count(kind, payload)
            self.emit(payload)

    async def _run_job(self, items: list[EvalItem]) -> None:
        for item in items:  # one transcript group: in order, so the server's prefix cache hits
            if self.stopping():
                return
            replied = await self._request(item)
            if replied is not None:  # else recorded as an error
                # Waits (keeping the slot) only while the replies waiting for their grade fill the backlog.
                await self.backlog.reserve(item)
                self._start_grading(item, *replied)

    def _row_record(self, item: EvalItem) -> tuple[EvalRecipe, dict]:
        """The row's recipe and the fields of its record before the reply: one function for a
        reply graded after its request and one graded from the journal, which must match."""
        recipe = recipe_named(item.recipe, self.recipes)
        fields = base_record(item, recipe, self.shas[item.source], tokenizer=self.config.tokenizer_spec)
        return recipe, self.base | fields

    # --- a request ---------------------------------------------------------------------------

    async def _request(self, item: EvalItem) -> tuple[EvalRecipe, dict, ChatResult] | None:
        """The row's reply (its recipe, its record's row fields, the reply), journaled; None
        when the row got an error record instead."""
        config = self.config
        recipe, record = self._row_record(item)
        self.in_flight += 1
        self.stats.max_in_flight = max(self.stats.max_in_flight, self.in_flight)
        if self.in_flight == config.concurrency:  # every slot taken: the sender waits for the server
            self.grader.expect(self.in_flight, scored_record, recipe)
        self.grader.expect_row(item, scored_record, recipe)
        try:
            messages = sent_messages(item, recipe, config.control)
            result = await chat_completion(
                self.client, config.model, messages, max_retries=config.max_retries, stop=self.stopping, **self.params
            )
        except ChatStopped as exc:
            if exc.attempts:  # sent before, then stopped while waiting to retry
                self._record_error(record, {"check": "stopped", "error": str(exc), "attempts": exc.attempts})
            return None
        except ChatError as exc:
            self._record_error(record, _chat_error_fields(exc), fatal=exc if exc.fatal else None)
            return None
        except Exception as exc:  # recorded, never fatal
            error = redact(f"{type(exc).__name__}: {exc}")
            self._record_error(record, {"check": "request", "error": error, "attempts": 1})
            return None
        finally:
            self.in_flight -= 1
        self.stats.sent += 1
        # Journaled first: the slot goes to the next request now, and a run killed before the
        # grade is written keeps the reply for the next run to grade.
        self.journal.write(journal_key(record), result)
        return recipe, record, result

    def _record_error(self, record: dict, fields: dict, fatal: ChatError | None = None) -> None:
        """A row sent (at least once) that got no reply to grade: an error record."""
        self.stats.sent += 1
        self.stats.errors += 1
        if fatal is not None:
            self.fatal.append(fatal)
        self.emit(record | {"status": STATUS_ERROR} | fields)

    # --- grading -------------------------------------------------------------------------------

    def _start_grading(self, item: EvalItem, recipe: EvalRecipe, record: dict, result: ChatResult) -> None:
        self._watch(self.grading, asyncio.create_task(self._grade(item, recipe, record, result)))

    async def _grade(self, item: EvalItem, recipe: EvalRecipe, record: dict, result: ChatResult) -> None:
        try:
            graded = await self.grader.grade(scored_record, item, recipe, result, self.config.strip_think)
            self.stats.scored += 1
            self.emit(record | graded)
            self.journal.recorded(journal_key(record))
        finally:
            self.backlog.release(item)

    # --- tasks ---------------------------------------------------------------------------------

    def _watch(self, running: set[asyncio.Task], task: asyncio.Task, *, slot: bool = False) -> None:
        """Keep `task` in `running` until it ends, then observe its exception (and give back its slot)."""
        running.add(task)

        def done(task: asyncio.Task) -> None:
            running.discard(task)
            if slot:
                self.semaphore.release()
            if not task.cancelled() and task.exception() is not None:
                self.crashed.append(task.exception())  # type: ignore[arg-type]

        task.add_done_callback(done)

    async def drain(self) -> None:
        """Await the requests in flight and their grades, also after a fatal answer or a crashed
        task: one task's exception must not cancel the replies of the others."""
        for running in (self.jobs, self.grading):  # the senders first: they start gradings
            if running:
                for outcome in await asyncio.gather(*running, return_exceptions=True):
                    if isinstance(outcome, Exception) and not any(outcome is seen for seen in self.crashed):
                        self.crashed.append(outcome)

    async def close(self) -> None:
        """Cancel what still runs (it must finish before the results file closes under it), then
        write every record to disk (the last fsync) before the journal lets go of their replies."""
        for running in (self.jobs, self.grading):
            for task in running:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)
        self.grader.close()
        try:
            self.writer.close()
        finally:
            self.journal.close()


def _chat_error_fields(exc: ChatError) -> dict[str, Any]:
    check = "fatal" if exc.fatal else "prompt_too_long" if is_prompt_too_long(exc.status, str(exc)) else "request"
    return {"check": check, "error": str(exc), "http_status": exc.status, "attempts": exc.attempts}


async def close_client(client: Any) -> None:
    close = getattr(client, "close", None)
    if close is not None:
        with contextlib.suppress(Exception):
            await close()
