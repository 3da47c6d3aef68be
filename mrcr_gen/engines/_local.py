"""The local engine: a process pool, or the calling process itself for one worker."""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.forkserver
import os
import signal
import sys
import threading
from collections import deque
from collections.abc import Callable, Generator, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

from .._files import discard, publish, publishing_deferred
from ._base import TaskFailed, available_cores, reporting_to, warn_if_unguarded_main
from ._fork_server import PARENT_VARIABLE
from ._forked import die_with_parent

#: How often the calling process reads what its workers report, at most (seconds).
PROGRESS_EVERY = 0.1
#: As Ray's default: a unit whose worker died (killed, out of memory) is run again this often.
MAX_RETRIES = 3

#: In a worker: its end of the engine's report queue (see `_start_worker`).
_reports: Any = None


def ensure_fork_server(preload: Iterable[str] = ()) -> None:
    """Start this process's multiprocessing fork server, if it is not running, importing the modules
    `preload` names (after `_fork_server`, which makes it end at once when its caller has gone; then
    `_fork_server_ready`, which keeps the collector off what they made). A server already running
    keeps what it imported: its workers then import the rest themselves.

    The server gets this process's import path. Python 3.11 and 3.12 ignore the `sys_path` they hand
    the server, which starts as `python -c`: it looked in the current folder first, so a folder
    holding another `mrcr_gen/` (an older checkout) gave the workers that copy of the modules it
    preloads. The server gets this process's `sys.path` as PYTHONPATH instead, and PYTHONSAFEPATH
    (Python 3.11+) keeps the current folder out; both are set only while it starts."""
    if fork_server_running():
        return
    modules = [f"{__package__}._fork_server", *preload, f"{__package__}._fork_server_ready"]
    multiprocessing.forkserver.set_forkserver_preload(modules)
    path = [os.getcwd() if entry == "" else entry for entry in sys.path]
    # Started from the main thread, the server can die with this process (see `_fork_server`).
    parent = str(os.getpid()) if threading.current_thread() is threading.main_thread() else ""
    with _environment(PYTHONSAFEPATH="1", PYTHONPATH=os.pathsep.join(path), **{PARENT_VARIABLE: parent}):
        multiprocessing.forkserver.ensure_running()


def fork_server_running() -> bool:
    return getattr(multiprocessing.forkserver._forkserver, "_forkserver_pid", None) is not None


def start_fork_server(preload: tuple[str, ...] = ()) -> multiprocessing.context.BaseContext:
    """The forkserver context, its server started now (if it is not running yet) importing the
    modules `preload` names (see `ensure_fork_server`)."""
    ensure_fork_server(preload)
    return multiprocessing.get_context("forkserver")


@contextlib.contextmanager
def _environment(**values: str) -> Generator[None, None, None]:
    previous = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _start_worker(reports: Any, caller_alive: Any) -> None:
    global _reports
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    _reports = reports
    _die_with_caller(caller_alive)


def _started() -> None:
    """A unit that does nothing: submitted to start a pool's workers (see `LocalEngine._submit`)."""


def _die_with_caller(caller_alive: Any) -> None:
    """End this worker the moment the process that runs the engine is gone (even killed with
    SIGKILL): it would otherwise wait for units forever, or go on writing the ones queued.

    `caller_alive` is the read end of a pipe whose write end only the calling process holds: the
    kernel closes it when that process dies, however it dies, and the read returns. A worker's
    parent is the fork server, not the caller, so on Linux the worker is also killed if the fork
    server dies (which, in turn, ends once the caller and the workers have).

    Neither can end a worker at the very moment its caller dies: a worker never moves a finished
    file into place itself (see `_run_unit`), so what it does before it notices writes nothing."""

    def watch() -> None:
        with contextlib.suppress(EOFError, OSError):
            caller_alive.recv_bytes()
        os._exit(1)  # no cleanup: what a unit was writing stays a temporary file (`remove_partials`)

    threading.Thread(target=watch, name="mrcr-gen caller watch", daemon=True).start()
    die_with_parent()


def _run_unit(fn: Callable[..., Any], call: int, index: int, unit: tuple, progress: bool) -> Any:
    """`fn(*unit)` as unit `index` of the `map` call `call`: reports that it started, and in which
    process (so a unit whose worker dies is known to have been running, and a stopped call can end
    its units at once), then its progress if `progress`. Returns the result and the files the unit
    finished, left for the caller to move into place (`mrcr_gen._files.publishing_deferred`).
    SimpleQueue.put writes to the pipe before it returns, so every report of a unit is readable by
    the caller before the unit's result reaches it."""
    _reports.put((call, index, None, os.getpid()))
    report = (lambda steps: _reports.put((call, index, steps, None))) if progress else None
    with reporting_to(report), publishing_deferred() as moves:
        return fn(*unit), moves


@dataclass
class _Unit:
    index: int
    args: tuple
    future: Future | None = None  # None: held back (see `_PoolCall.suspects`)
    started: bool = False  # this run has begun in a worker
    ran: int = 0  # steps reported by this run
    shown: int = 0  # steps passed on to the caller, by any run
    deaths: int = 0  # runs that ended with a dead worker, as the only unit running
    failed: str | None = None

    def broke(self) -> bool:
        """Ended because its pool broke, not with a result or its own error."""
        return self.future is not None and self.future.done() and isinstance(self.future.exception(), BrokenProcessPool)

    def ended(self) -> bool:
        """Ended for good: with a result, its own error, or failed."""
        return self.failed is not None or (self.future is not None and self.future.done() and not self.broke())

    def running(self) -> bool:
        return self.future is not None and not self.future.done()


class LocalEngine:
    """`workers` processes (default: the cores). With one worker, units run in the calling process.

    A unit whose worker died (killed, out of memory) is run again in a new pool, up to
    `max_retries` times, as Ray does (see `_PoolCall` for how the unit that died is told apart).

    On Linux the workers come from a fork server that has imported the modules in `preload`
    first (e.g. one that loads the tokenizer), so every worker starts warm and shares those pages.
    """

    name = "local"

    def __init__(
        self, workers: int | None = None, *, preload: tuple[str, ...] = (), max_retries: int = MAX_RETRIES
    ) -> None:
        self.workers = max(1, workers if workers is not None else available_cores())
        if self.workers > 1 and warn_if_unguarded_main("units run in this process, one at a time"):
            self.workers = 1
        self.max_retries = max_retries
        self._pool: ProcessPoolExecutor | None = None
        self._reports: Any = None
        self._caller_alive: tuple[Any, Any] | None = None  # the pipe the workers watch (see `_die_with_caller`)
        self._calls = 0  # map calls so far: tells their reports apart
        self._idle_breaks = 0  # pools that broke before any of their workers started a unit
        self._worker_pids: set[int] = set()  # of the current pool, as its reports name them
        self._context: multiprocessing.context.BaseContext | None = None
        self._all_started = False  # the current pool's workers were all started (see `_submit`)
        if self.workers > 1 and sys.platform.startswith("linux"):
            # Started now, the fork server imports `preload` while the caller is still preparing
            # its work, instead of when the first unit is submitted.
            self._context = start_fork_server(preload)

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            context = self._context or multiprocessing.get_context("spawn")
            # A queue per pool: a worker killed while writing to the old one may hold its lock.
            if self._reports is not None:
                self._reports.close()
            self._reports = context.SimpleQueue()
            # Held open until the pool has stopped: workers may start (and be given the read end) later.
            self._caller_alive = context.Pipe(duplex=False)
            self._worker_pids.clear()
            self._pool = ProcessPoolExecutor(
                max_workers=self.workers,
                mp_context=context,
                initializer=_start_worker,
                initargs=(self._reports, self._caller_alive[0]),
            )
            self._all_started = False
        return self._pool

    def _submit(self, *args: Any) -> Future:
        """`_run_unit(*args)` submitted to the pool. The pool starts a worker for each unit submitted
        while none is idle: after its first unit, units that do nothing start the others at once, so
        that the second worker is not forked only once the first unit (a generation's up-front
        check) has ended and the units that follow it are submitted."""
        pool = self._executor()
        future = pool.submit(_run_unit, *args)
        if not self._all_started:
            self._all_started = True
            for _ in range(self.workers - 1):
                pool.submit(_started)
        return future

    def map(
        self,
        fn: Callable[..., Any],
        units: Iterable[tuple],
        *,
        window: int | None = None,
        on_progress: Callable[[int, int], None] | None = None,
    ) -> Generator[Any, None, None]:
        if self.workers == 1:
            for index, unit in enumerate(units):
                report = None if on_progress is None else lambda steps, index=index: on_progress(index, steps)
                with reporting_to(report):
                    result = fn(*unit)
                yield result
            return
        self._calls += 1
        call = _PoolCall(self, fn, self._calls, on_progress)
        queue = iter(enumerate(units))
        try:
            while True:
                while len(call.pending) < (window or 2 * self.workers) and (item := next(queue, None)) is not None:
                    call.add(_Unit(*item))
                if not call.pending:
                    return
                head = call.next_done()
                del call.pending[head.index]
                if head.failed is not None:
                    yield TaskFailed(head.index, head.failed)
                else:
                    assert head.future is not None
                    result, moves = head.future.result()
                    publish(moves)  # here, by this process: a dead caller puts no file in place
                    yield result
        finally:
            # Interrupted, a unit's own error, or the caller stopped reading: what still runs is
            # not wanted, and may take minutes.
            if any(unit.running() for unit in call.pending.values()):
                self._stop_workers()
            call.discard_unreceived()

    def _stop_pool(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        if self._caller_alive is not None:
            for end in self._caller_alive:
                end.close()
            self._caller_alive = None

    def _stop_workers(self) -> None:
        """End the pool now: its workers are killed, not waited for (a unit can run for minutes).
        Whatever they were writing stays a temporary file (see `mrcr_gen._files.remove_partials`)."""
        self._take_reports()  # for the processes they name
        for pid in self._worker_pids:
            with contextlib.suppress(ProcessLookupError):  # it had ended already
                os.kill(pid, signal.SIGTERM)
        self._stop_pool()

    def _take_reports(self) -> list[tuple[int, int, int | None, int | None]]:
        """The reports the workers sent since the last call (noting the processes that started units)."""
        taken = []
        while self._reports is not None and not self._reports.empty():
            report = self._reports.get()
            if report[3] is not None:
                self._worker_pids.add(report[3])
            taken.append(report)
        return taken

    def close(self) -> None:
        self._stop_pool()
        if self._reports is not None:
            self._reports.close()
            self._reports = None

    def __enter__(self) -> LocalEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _PoolCall:
    """The units of one `map` call on a pool, and what to do when a worker dies.

    A dead worker breaks the whole pool: a new one runs again every unit that had not ended. If
    one unit was running, it caused the death and counts it; a unit that does so more than
    `max_retries` times fails. If several were running, which one caused it cannot be told: they
    become suspects, run again one at a time with nothing beside them, until each has ended or
    failed on its own; the other units wait meanwhile.
    """

    def __init__(
        self, engine: LocalEngine, fn: Callable[..., Any], call: int, on_progress: Callable[[int, int], None] | None
    ) -> None:
        self.engine, self.fn, self.call, self.on_progress = engine, fn, call, on_progress
        self.pending: dict[int, _Unit] = {}  # in unit order, until yielded
        self.suspects: deque[_Unit] = deque()

    def add(self, unit: _Unit) -> None:
        self.pending[unit.index] = unit
        if not self.suspects:
            self._submit(unit)

    def next_done(self) -> _Unit:
        """The first pending unit, once it has ended (with a result, its own error, or failed),
        with every report of its run passed on."""
        while True:
            head = next(iter(self.pending.values()))
            ended = head.ended()
            self._read_reports()  # after seeing it end: its reports were sent before its result
            self._clear_suspect()
            if ended:
                return head
            if any(unit.broke() for unit in self.pending.values()):
                self._restart()
                continue
            running = [unit.future for unit in self.pending.values() if unit.future is not None and unit.running()]
            wait(running, timeout=PROGRESS_EVERY, return_when=FIRST_COMPLETED)

    def discard_unreceived(self) -> None:
        """Remove the files of the units that ended but whose results were not taken: no file
        appears that the caller did not receive."""
        for unit in self.pending.values():
            future = unit.future
            if future is not None and future.done() and not future.cancelled() and future.exception() is None:
                discard(future.result()[1])

    def _submit(self, unit: _Unit) -> None:
        unit.started, unit.ran = False, 0
        progress = self.on_progress is not None
        try:
            unit.future = self.engine._submit(self.fn, self.call, unit.index, unit.args, progress)
        except BrokenProcessPool as exc:  # a worker died since the last unit was submitted
            unit.future = Future()
            unit.future.set_exception(exc)

    def _read_reports(self) -> None:
        for call, index, steps, _ in self.engine._take_reports():
            unit = self.pending.get(index)
            if call != self.call or unit is None:  # from a call abandoned earlier
                continue
            if steps is None:
                unit.started = True
                continue
            unit.ran += steps
            if unit.ran > unit.shown and self.on_progress is not None:  # a run again shows only what is new
                self.on_progress(index, unit.ran - unit.shown)
                unit.shown = unit.ran

    def _clear_suspect(self) -> None:
        while self.suspects:
            if not self.suspects[0].ended():
                return  # still to run alone
            self.suspects.popleft()
            self._resume()

    def _restart(self) -> None:
        self.engine._stop_pool()  # settles every future of the broken pool
        self._read_reports()  # which units had started
        broken = [unit for unit in self.pending.values() if unit.broke()]
        for unit in broken:
            unit.future = None
        started = [unit for unit in broken if unit.started]
        if len(started) == 1:
            culprit = started[0]
            culprit.deaths += 1
            if culprit.deaths > self.engine.max_retries:
                culprit.failed = f"its worker process died ({culprit.deaths} times)"
        elif started:
            self.suspects.extend(unit for unit in started if unit not in self.suspects)
        else:
            self.engine._idle_breaks += 1  # workers die before running anything (a dead fork server)
            if self.engine._idle_breaks > self.engine.max_retries:
                for unit in broken:
                    unit.failed = "worker processes die as they start"
        self._resume()

    def _resume(self) -> None:
        """Submit the first suspect alone, or, with none left, every unit held back."""
        if self.suspects:
            suspect = self.suspects[0]
            if suspect.failed is None and suspect.future is None:
                self._submit(suspect)
            return
        for unit in self.pending.values():
            if unit.failed is None and unit.future is None:
                self._submit(unit)
