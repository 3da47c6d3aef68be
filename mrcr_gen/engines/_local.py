"""The local engine: a process pool, or the calling process itself for one worker."""

from __future__ import annotations

import multiprocessing
import multiprocessing.forkserver
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from ._base import TaskFailed, available_cores


def _ignore_interrupts() -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle


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
            self._pool = ProcessPoolExecutor(
                max_workers=self.workers, mp_context=context, initializer=_ignore_interrupts
            )
        return self._pool

    def map(self, fn: Callable[..., Any], units: Iterable[tuple], *, window: int | None = None) -> Iterator[Any]:
        if self.workers == 1:
            for unit in units:
                yield fn(*unit)
            return
        window = window or 2 * self.workers
        pool = self._executor()
        pending: deque[tuple[int, Future]] = deque()
        queue = iter(enumerate(units))
        broken: str | None = None
        while True:
            while broken is None and len(pending) < window:
                item = next(queue, None)
                if item is None:
                    break
                try:
                    pending.append((item[0], pool.submit(fn, *item[1])))
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
            try:
                yield future.result()
            except BrokenProcessPool as exc:
                broken = broken or f"worker process died ({exc})"
                yield TaskFailed(index, broken)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def __enter__(self) -> LocalEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
