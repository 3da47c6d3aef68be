"""What keeps `mrcr-eval`'s event loop free to send: the planner read ahead in its own thread
(`Prefetch`), and replies graded in worker processes (`GradePool`), beside the requests: a reply
gives its slot to the next request at once, and waits for its grade in the `Backlog`.

Reading a row (parquet, JSON, tokens) and grading a reply (the grade, the failure analysis, the
reference floors: about 20 `SequenceMatcher` ratios, some 10 ms for a row of the 8k bin) are CPU
work. On the event loop, or in threads of its process that hold the GIL, they stall every request
in flight; the grading runs in worker processes instead, on every core.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import gc
import multiprocessing
import os
import pickle
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from .._openai_request import content_reaches
from ..engines._base import available_cores, warn_if_unguarded_main
from ..engines._local import _die_with_caller, ensure_fork_server
from ._items import EvalRecipe
from ._planner import GRADE, JOB

T = TypeVar("T")

#: Characters of prompt text the planner may hold read ahead of the sender (past one step): about
#: two rows of the 1M bin (some 10 MB of memory each), or hundreds of the 8k bin. The steps ahead are
#: also bounded by the concurrency: a whole wave of answers can be followed by requests at once,
#: without each waiting for the planner's thread to read its row (and for the GIL to get there).
PREFETCH_CHARS = 8_000_000
#: Seconds of grading in a thread, in one run, after which it starts worker processes: their
#: start costs a second or two of CPU each, more than grading a few dozen short rows.
PROCESSES_AFTER_S = 3.0
#: Grades waiting for their turn after which the worker processes start at once (a fast server
#: answers faster than one thread grades: the run is long enough to pay for them). While they
#: start, the grades wait for them rather than taking this process's GIL from the requests.
PROCESSES_AFTER_WAITING = 16
#: Characters of prompt text of a row (some 250,000 tokens) whose request starts the worker
#: processes at once: its grade alone (the failure analysis walks every writing of the row) takes
#: tens of milliseconds, and in a thread of this process it takes them from the requests' GIL.
PROCESSES_FOR_ROW_CHARS = 1_000_000
#: Characters of prompt text the replies waiting for their grade may hold (each keeps its row in
#: memory): about 2,800 rows of the 8k bin, or 25 of the 1M bin. Past it, new replies wait with their
#: slot, so the requests slow down to the grading's pace instead of the memory growing.
BACKLOG_CHARS = 100_000_000


class Backlog:
    """The rows whose reply waits for its grade, bounded by their prompts' size (`BACKLOG_CHARS`);
    one row is always let in, however large."""

    def __init__(self, budget: int | None = None):
        self.budget = BACKLOG_CHARS if budget is None else budget
        self.used = 0
        self._changed = asyncio.Event()
        self._sizes: dict[int, int] = {}  # id of a reserved item -> its size, summed once (thousands of messages)

    @staticmethod
    def size(item: Any) -> int:
        return sum(len(message.get("content") or "") for message in item.messages or ())

    async def reserve(self, item: Any) -> None:
        size = self.size(item)
        while self.used and self.used + size > self.budget:
            self._changed.clear()
            await self._changed.wait()
        self.used += size
        self._sizes[id(item)] = size  # the item stays alive (its grade holds it) until `release`

    def release(self, item: Any) -> None:
        self.used -= self._sizes.pop(id(item))
        self._changed.set()


def step_chars(step: tuple[str, Any] | None) -> int:
    """Characters of prompt text a planner step holds (a job's rows, a reply's row to grade)."""
    if step is None:
        return 0
    kind, payload = step
    if kind == JOB:  # the items of one transcript group
        return sum(Backlog.size(item) for item in payload)
    if kind == GRADE:  # (the item, its journaled reply)
        return Backlog.size(payload[0])
    return 0  # a record to write


class Prefetch:
    """Steps of `plan` made by a thread of its own, at most `depth` ahead of `next`, and no more
    once those ahead hold `budget` characters of prompt text (`PREFETCH_CHARS`; one step always).

    The thread stops before its next step after `close()`; an exception of the plan is raised by `next`.
    """

    def __init__(self, plan: Iterator[tuple[str, Any]], depth: int = 1, budget: int = PREFETCH_CHARS):
        self._plan = plan
        self._depth = max(depth, 1)
        self._budget = budget
        self._loop = asyncio.get_running_loop()
        self._ready: asyncio.Queue[tuple[tuple[str, Any] | BaseException | None, int]] = asyncio.Queue()
        self._changed = threading.Condition()
        self._ahead = 0  # steps made and not yet taken, and their characters
        self._ahead_chars = 0
        self._stopped = False
        self._thread = threading.Thread(target=self._produce, name="mrcr-eval planner", daemon=True)
        self._thread.start()

    def _put(self, value: tuple[str, Any] | BaseException | None, chars: int = 0) -> None:
        self._loop.call_soon_threadsafe(self._ready.put_nowait, (value, chars))

    def _room(self) -> bool:
        """Wait until a step may be made; False once stopped."""
        with self._changed:
            while not self._stopped and (
                self._ahead >= self._depth or (self._ahead and self._ahead_chars >= self._budget)
            ):
                self._changed.wait()
            return not self._stopped

    def _produce(self) -> None:
        try:
            while self._room():
                step = next(self._plan, None)
                chars = step_chars(step)
                with self._changed:
                    self._ahead += 1
                    self._ahead_chars += chars
                self._put(step, chars)
                if step is None:
                    return
        except BaseException as exc:  # raised by `next`, in the event loop's task
            with contextlib.suppress(RuntimeError):  # the loop closed: nobody is waiting
                self._put(exc)

    async def next(self) -> tuple[str, Any] | None:
        """The next step, or None after the last."""
        step, chars = await self._ready.get()
        if isinstance(step, BaseException):
            raise step
        with self._changed:
            self._ahead -= 1
            self._ahead_chars -= chars
            self._changed.notify()
        return step

    async def close(self) -> None:
        """Stop the thread and wait for it (it may be inside a row's reading)."""
        with self._changed:
            self._stopped = True
            self._changed.notify()
        await asyncio.to_thread(self._thread.join)


def _grader_context() -> multiprocessing.context.BaseContext:
    # fork would copy the locks of this process's threads mid-use; a fork server starts clean processes.
    return multiprocessing.get_context("forkserver" if sys.platform.startswith("linux") else "spawn")


#: Grading processes run at a lower priority: the requests (this process's loop, its planner,
#: and a server on the same machine) come first, and the grades take the CPU left over.
GRADING_NICENESS = 10


def _start_grading_worker(caller_alive: Any) -> None:
    with contextlib.suppress(OSError):
        os.nice(GRADING_NICENESS)
    _die_with_caller(caller_alive)


def _warm(recipe: EvalRecipe) -> None:
    """Run in each new worker: receiving `recipe` imports its module, before the first grade needs it."""


class _Workers:
    """This process's grading processes: started once (about a second each, importing the package)
    and kept for every later run of the process, as tests and notebooks make many."""

    def __init__(self, workers: int, recipe: EvalRecipe, grader: Callable[..., Any]):
        context = _grader_context()
        if context.get_start_method() == "forkserver":
            # Imported once by the fork server (when this starts it), not by every worker: each
            # worker's own import of the package is most of a second of CPU, taken from the requests.
            # matplotlib too: the workers draw the report's plots side by side at the run's end.
            # The one fork server of this process, whoever starts it first.
            ensure_fork_server([grader.__module__, type(recipe).__module__, "matplotlib.pyplot"])
        # Only this process holds the write end: the workers end when it does, however it ends.
        self.caller_alive = context.Pipe(duplex=False)
        self.executor = ProcessPoolExecutor(
            workers, mp_context=context, initializer=_start_grading_worker, initargs=(self.caller_alive[0],)
        )
        self.warming = [self.executor.submit(_warm, recipe) for _ in range(workers)]

    def ready(self) -> bool:
        return all(future.done() for future in self.warming)


_workers: _Workers | None = None
_workers_lock = threading.Lock()


def _process_workers(recipe: EvalRecipe, grader: Callable[..., Any]) -> _Workers:
    """This process's grading processes, started if they are not. It blocks (starting the fork
    server, which imports the package, and asking it for the workers): call it in a thread."""
    global _workers
    with _workers_lock:
        if _workers is None:
            _workers = _Workers(available_cores(), recipe, grader)
        return _workers


def _forget_workers() -> None:
    global _workers
    _workers = None


def _forget_workers_in_child() -> None:
    global _workers_lock
    _workers_lock = threading.Lock()  # another thread of the parent may have held it at the fork
    _forget_workers()


# A forked child has none of its parent's processes: it starts its own when it needs them.
os.register_at_fork(after_in_child=_forget_workers_in_child)


def run_side_by_side(calls: Sequence[tuple[Callable[..., Any], tuple[Any, ...]]]) -> None:
    """Each `function(*args)` of `calls`: side by side, on every core, in processes the fork server
    of a run's grading processes starts (it imported matplotlib: the report's plots at the end of
    a long run), at this process's priority (not the grading's: a report on a busy machine must not
    wait for idle cores); else here, one after another. The first exception is raised, once all
    are done."""
    workers = _workers
    context = _grader_context()
    if workers is None or len(calls) < 2 or context.get_start_method() != "forkserver":
        for function, args in calls:
            function(*args)
        return
    with ProcessPoolExecutor(
        min(len(calls), available_cores()),
        mp_context=context,
        initializer=_die_with_caller,
        initargs=(workers.caller_alive[0],),
    ) as executor:
        futures = []
        with contextlib.suppress(OSError, RuntimeError, BrokenProcessPool):  # no process starts: drawn here
            for function, args in calls:
                futures.append(executor.submit(function, *args))
        failed: Exception | None = None
        for i, (function, args) in enumerate(calls):
            try:
                if i >= len(futures):
                    function(*args)
                    continue
                try:
                    futures[i].result()
                except BrokenProcessPool:  # a process was killed: this call here
                    function(*args)
            except Exception as exc:  # raised once every call is done, as the first of them
                failed = failed or exc
    if failed is not None:
        raise failed


@contextlib.contextmanager
def frozen_heap() -> Iterator[None]:
    """What is alive as the run starts (the modules, their classes: about 120,000 objects) kept out
    of the collector's passes while it runs, which would walk it again and again as the rows'
    messages come and go; and, as the process ends, everything (its last collection walks nothing).
    Together a third of a second of a 1M-bin job's CPU. A program that froze objects of its own
    (`gc.freeze`) keeps its heap as it is."""
    if gc.get_freeze_count():
        yield
        return
    atexit.unregister(gc.freeze)
    atexit.register(gc.freeze)  # once, whatever the commands this process runs
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()  # the objects frozen become collectable again: nothing is kept past the run


class GradePool:
    """Grades replies off the event loop: in a thread, then, once this run's grading has taken
    `PROCESSES_AFTER_S` seconds there or `PROCESSES_AFTER_WAITING` grades wait (a run long enough to
    pay for their start), in this process's grading processes, one per core. Not with one core, nor
    for what another process cannot be sent (a test's own recipe or grader)."""

    def __init__(self) -> None:
        self.processes = available_cores() > 1 and not warn_if_unguarded_main("grading runs in one thread")
        self.thread_seconds = 0.0
        # A thread of its own, not the loop's default executor: hundreds of grades may wait, and
        # queued there they would delay what else runs in it (a long request's encoding, ...).
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="mrcr-eval grading")
        # Where a grade runs is chosen when it starts, not when it is asked for: grades asked for
        # before the processes were ready would otherwise all stay queued in the thread.
        self._dispatched = asyncio.Semaphore(available_cores())
        self._waiting = 0
        self._long_run = False
        self._starting: asyncio.Future[_Workers] | None = None  # the worker processes, being started in a thread
        self._sendable: dict[int, tuple[Any, bool]] = {}  # id -> (the object, kept alive; sendable)

    def _can_send(self, *objects: Any) -> bool:
        for thing in objects:
            if id(thing) not in self._sendable:
                try:
                    pickle.dumps(thing)
                    self._sendable[id(thing)] = (thing, True)
                except Exception:  # pickle raises what the object's parts raise
                    self._sendable[id(thing)] = (thing, False)
        return all(self._sendable[id(thing)][1] for thing in objects)

    def _timed(self, call: Callable[[], T]) -> T:
        started = time.perf_counter()
        try:
            return call()
        finally:
            self.thread_seconds += time.perf_counter() - started

    def expect(self, replies: int, grader: Callable[..., Any], recipe: EvalRecipe) -> None:
        """`replies` requests are in flight, to be graded by `grader`, and no more will be sent
        before one is answered: when that many (`PROCESSES_AFTER_WAITING`) will wait for their grade,
        start the worker processes now, while the requests are in the server, neither while the
        sender still has requests to make (their start would slow it) nor when the replies are back
        and waiting behind their start."""
        if self._long_run or replies < PROCESSES_AFTER_WAITING:
            return
        self._long_run = True
        if self.processes and self._can_send(grader, recipe):
            self._start_workers(recipe, grader)

    def expect_row(self, item: Any, grader: Callable[..., Any], recipe: EvalRecipe) -> None:
        """A request for `item` is sent: a row of `PROCESSES_FOR_ROW_CHARS` or more makes the run
        long, and the worker processes start now, to be ready when its reply is back."""
        if self._long_run or not content_reaches(item.messages or (), PROCESSES_FOR_ROW_CHARS):
            return
        self._long_run = True
        if self.processes and self._can_send(grader, recipe):
            self._start_workers(recipe, grader)

    def _start_workers(self, recipe: EvalRecipe, grader: Callable[..., Any]) -> asyncio.Future[_Workers]:
        """The worker processes, started in a thread, once: the start blocks for most of a second."""
        if self._starting is None:
            self._starting = asyncio.ensure_future(asyncio.to_thread(_process_workers, recipe, grader))
            # Observed here too: a start that failed is graded in the thread, maybe by no grade at all.
            self._starting.add_done_callback(lambda started: started.cancelled() or started.exception())
        return self._starting

    async def grade(self, grader: Callable[..., T], item: Any, recipe: EvalRecipe, *more: Any) -> T:
        """`grader(item, recipe, *more)` (`scored_record`), computed off the event loop."""
        self._waiting += 1
        try:
            await self._dispatched.acquire()
        finally:
            self._waiting -= 1
        try:
            return await self._grade(functools.partial(grader, item, recipe, *more), grader, recipe)
        finally:
            self._dispatched.release()

    async def _grade(self, call: Callable[[], T], grader: Callable[..., T], recipe: EvalRecipe) -> T:
        workers = None
        # Once long, the run stays long: its later grades go to the processes too.
        self._long_run = (
            self._long_run or self.thread_seconds >= PROCESSES_AFTER_S or self._waiting >= PROCESSES_AFTER_WAITING
        )
        if self.processes and self._long_run and self._can_send(grader, recipe):
            with contextlib.suppress(Exception):  # workers that cannot start: graded in the thread
                workers = await asyncio.shield(self._start_workers(recipe, grader))
                if not workers.ready():
                    await asyncio.gather(*(asyncio.wrap_future(started) for started in workers.warming))
        loop = asyncio.get_running_loop()
        if workers is None or not workers.ready():
            return await loop.run_in_executor(self._thread, self._timed, call)
        try:
            return await loop.run_in_executor(workers.executor, call)
        except BrokenProcessPool:  # a worker was killed (out of memory?): new workers; this grade in a thread
            with _workers_lock:
                if _workers is workers:
                    _forget_workers()
            self._starting = None  # the next grade starts new ones
            return await loop.run_in_executor(self._thread, self._timed, call)

    def close(self) -> None:
        """Drop the grades not yet started (their replies stay in the journal); one under way ends on its own."""
        self._thread.shutdown(wait=False, cancel_futures=True)
