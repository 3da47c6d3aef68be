"""What keeps `mrcr-eval`'s event loop free to send: the planner read ahead in its own thread
(`Prefetch`), and replies graded in worker processes (`GradePool`).

Reading a row (parquet, JSON, tokens) and grading a reply (the grade, the failure analysis, the
reference floors: `SequenceMatcher` in pure Python, 0.1-0.5 s a row) are CPU work. On the event loop,
or in threads of its process that hold the GIL, they stall every request in flight; the grading
runs in worker processes instead, on every core.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import multiprocessing
import os
import pickle
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from ..engines._base import available_cores
from ..engines._local import _die_with_caller
from ._items import EvalItem, EvalRecipe
from ._planner import JOB, scored_record

#: Jobs (rows to send) the planner reads ahead of the sender: enough that a free slot finds one
#: ready, few enough that long rows (about 10 MB each at 1M tokens) do not pile up.
PREFETCH_JOBS = 4


class Prefetch:
    """Steps of `plan` produced by a thread of their own, at most `depth` jobs ahead of `next`.

    The thread stops at the next step after `stop()`; an exception of the plan is raised by `next`.
    """

    def __init__(self, plan: Iterator[tuple[str, Any]], depth: int = PREFETCH_JOBS):
        self._plan = plan
        self._loop = asyncio.get_running_loop()
        self._ready: asyncio.Queue[tuple[str, Any] | BaseException | None] = asyncio.Queue()
        self._room = threading.Semaphore(depth)
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._produce, name="mrcr-eval planner", daemon=True)
        self._thread.start()

    def _put(self, value: tuple[str, Any] | BaseException | None) -> None:
        self._loop.call_soon_threadsafe(self._ready.put_nowait, value)

    def _produce(self) -> None:
        try:
            for step in self._plan:
                if step[0] == JOB:
                    while not self._room.acquire(timeout=0.1):
                        if self._stopped.is_set():
                            return
                if self._stopped.is_set():
                    return
                self._put(step)
            self._put(None)
        except BaseException as exc:  # raised by `next`, in the event loop's task
            with contextlib.suppress(RuntimeError):  # the loop closed: nobody is waiting
                self._put(exc)

    async def next(self) -> tuple[str, Any] | None:
        """The next step, or None after the last."""
        step = await self._ready.get()
        if isinstance(step, BaseException):
            raise step
        if step is not None and step[0] == JOB:
            self._room.release()
        return step

    def stop(self) -> None:
        self._stopped.set()

    async def close(self) -> None:
        """Stop the thread and wait for it (it may be inside a row's reading)."""
        self.stop()
        await asyncio.to_thread(self._thread.join)


def _grader_context() -> multiprocessing.context.BaseContext:
    # fork would copy the locks of this process's threads mid-use; a fork server starts clean processes.
    return multiprocessing.get_context("forkserver" if sys.platform.startswith("linux") else "spawn")


def _warm(recipe: EvalRecipe) -> None:
    """Run in each new worker: receiving `recipe` imports its module, before the first grade needs it."""


class _Workers:
    """This process's grading processes: started once (about a second each, importing the package)
    and kept for every later run of the process, as tests and notebooks make many."""

    def __init__(self, workers: int, recipe: EvalRecipe):
        context = _grader_context()
        # Only this process holds the write end: the workers end when it does, however it ends.
        self._caller_alive = context.Pipe(duplex=False)
        self.executor = ProcessPoolExecutor(
            workers, mp_context=context, initializer=_die_with_caller, initargs=(self._caller_alive[0],)
        )
        self.warming = [self.executor.submit(_warm, recipe) for _ in range(workers)]

    def ready(self) -> bool:
        return all(future.done() for future in self.warming)


_workers: _Workers | None = None


def _process_workers(recipe: EvalRecipe) -> _Workers:
    global _workers
    if _workers is None:
        _workers = _Workers(available_cores(), recipe)
    return _workers


def _forget_workers() -> None:
    global _workers
    _workers = None


# A forked child has none of its parent's processes: it starts its own when it needs them.
os.register_at_fork(after_in_child=_forget_workers)


class GradePool:
    """`scored_record` in this process's grading processes, one per core, started by the first
    reply (after the first request left: their start costs seconds of CPU) and used once they
    have started; in a thread before, with one core, or for a recipe that another process cannot
    be sent (a test's own)."""

    def __init__(self) -> None:
        self.processes = available_cores() > 1
        self._sendable: dict[str, bool] = {}

    def _sendable_recipe(self, recipe: EvalRecipe) -> bool:
        if recipe.name not in self._sendable:
            try:
                pickle.dumps(recipe)
                self._sendable[recipe.name] = True
            except Exception:  # pickle raises what the object's parts raise
                self._sendable[recipe.name] = False
        return self._sendable[recipe.name]

    async def grade(self, item: EvalItem, recipe: EvalRecipe, result: Any, strip_think: bool) -> dict[str, Any]:
        """The fields of a graded row (`scored_record`), computed off the event loop."""
        call = functools.partial(scored_record, item, recipe, result, strip_think)
        workers = _process_workers(recipe) if self.processes and self._sendable_recipe(recipe) else None
        if workers is None or not workers.ready():
            return await asyncio.to_thread(call)
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(workers.executor, call)
        except BrokenProcessPool:  # a worker was killed (out of memory?): new workers; this grade in a thread
            if _workers is workers:
                _forget_workers()
            return await asyncio.to_thread(call)
