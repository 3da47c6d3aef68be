"""The local engine: a process pool, or the calling process itself for one worker."""

from __future__ import annotations

import multiprocessing
import multiprocessing.forkserver
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from ._base import TaskFailed, available_cores, reporting_to

#: How often the calling process passes on the progress its workers report, at most (seconds).
PROGRESS_EVERY = 0.1

#: In a worker: its end of the engine's progress queue (see `_start_worker`).
_progress: Any = None


def _start_worker(progress: Any) -> None:
    import signal

    global _progress
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    _progress = progress


def _run_unit(fn: Callable[..., Any], index: int, unit: tuple, call: int | None) -> Any:
    """`fn(*unit)`, its progress reported as from unit `index` of the `map` call `call` (None: not
    reported). SimpleQueue.put writes to the pipe before it returns, so every report of a unit is
    readable by the caller before the unit's result reaches it."""
    report = None if call is None else lambda steps: _progress.put((call, index, steps))
    with reporting_to(report):
        return fn(*unit)


class LocalEngine:
    """`workers` processes (default: the cores). With one worker, units run in the calling process.

    On Linux the workers come from a fork server that has imported the modules in `preload`
    first (e.g. one that loads the tokenizer), so every worker starts warm and shares those pages.
    """

    name = "local"

    def __init__(self, workers: int | None = None, *, preload: tuple[str, ...] = ()) -> None:
        self.workers = max(1, workers if workers is not None else available_cores())
        self._preload = preload
        self._pool: ProcessPoolExecutor | None = None
        self._progress: Any = None
        self._calls = 0  # map calls so far: tells their progress reports apart
        self._context: multiprocessing.context.BaseContext | None = None
        if self.workers > 1 and sys.platform.startswith("linux"):
            # Started now, the fork server imports `preload` while the caller is still preparing
            # its work, instead of when the first unit is submitted.
            self._context = multiprocessing.get_context("forkserver")
            if preload:
                self._context.set_forkserver_preload(list(preload))
            multiprocessing.forkserver.ensure_running()

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            context = self._context or multiprocessing.get_context("spawn")
            self._progress = context.SimpleQueue()
            self._pool = ProcessPoolExecutor(
                max_workers=self.workers, mp_context=context, initializer=_start_worker, initargs=(self._progress,)
            )
        return self._pool

    def _pass_on_progress(self, call: int, on_progress: Callable[[int, int], None]) -> None:
        while not self._progress.empty():
            from_call, index, steps = self._progress.get()
            if from_call == call:  # not a unit left running by an earlier call that was abandoned
                on_progress(index, steps)

    def map(
        self,
        fn: Callable[..., Any],
        units: Iterable[tuple],
        *,
        window: int | None = None,
        on_progress: Callable[[int, int], None] | None = None,
    ) -> Iterator[Any]:
        if self.workers == 1:
            for index, unit in enumerate(units):
                report = None if on_progress is None else lambda steps, index=index: on_progress(index, steps)
                with reporting_to(report):
                    result = fn(*unit)
                yield result
            return
        window = window or 2 * self.workers
        pool = self._executor()
        self._calls += 1
        call = self._calls if on_progress is not None else None
        pending: deque[tuple[int, Future]] = deque()
        queue = iter(enumerate(units))
        broken: str | None = None
        while True:
            while broken is None and len(pending) < window:
                item = next(queue, None)
                if item is None:
                    break
                try:
                    pending.append((item[0], pool.submit(_run_unit, fn, *item, call)))
                except BrokenProcessPool as exc:
                    broken = f"worker process died: {exc}"
                    pending.append((item[0], None))  # type: ignore[arg-type]
            if not pending:
                if broken is None:
                    return
                # The pool is gone: every unit not yet run fails the same way.
                for index, _ in queue:
                    yield TaskFailed(index, broken)
                return
            index, future = pending.popleft()
            if future is None:
                yield TaskFailed(index, broken or "worker process died")
                continue
            if call is not None and on_progress is not None:
                while not wait([future], timeout=PROGRESS_EVERY).done:
                    self._pass_on_progress(call, on_progress)
                self._pass_on_progress(call, on_progress)
            try:
                yield future.result()
            except BrokenProcessPool as exc:
                broken = broken or f"worker process died ({exc})"
                yield TaskFailed(index, broken)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
            self._progress.close()

    def __enter__(self) -> LocalEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
