"""What every engine offers, and how to pick one."""

from __future__ import annotations

import ast
import os
import sys
import threading
import warnings
from collections.abc import Callable, Generator, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

#: Where `report_progress` sends, while a unit runs in this process (set by the engine running it).
_reporter: Callable[[int], None] | None = None


def report_progress(steps: int) -> None:
    """Called by a running unit: `steps` more of its work are done (rows composed, say). The engine
    passes them to the `on_progress` given to `map`, so a long unit moves the caller's progress bar
    before it ends. Does nothing where no engine listens (a unit called directly, or on Ray)."""
    if _reporter is not None:
        _reporter(steps)


@contextmanager
def reporting_to(reporter: Callable[[int], None] | None) -> Iterator[None]:
    """Within: `report_progress` calls `reporter` (engines set it around each unit they run)."""
    global _reporter
    previous, _reporter = _reporter, reporter
    try:
        yield
    finally:
        _reporter = previous


@dataclass(frozen=True)
class TaskFailed:
    """A unit whose worker died (killed, out of memory, node lost) even after the engine's retries.

    An exception raised by the unit's own code is not this: it is re-raised to the caller as is.
    """

    index: int
    message: str


class Engine(Protocol):
    name: str
    #: Units that can run at once (processes, or the cluster's CPUs).
    workers: int

    def map(
        self,
        fn: Callable[..., Any],
        units: Iterable[tuple],
        *,
        window: int | None = None,
        on_progress: Callable[[int, int], None] | None = None,
    ) -> Generator[Any, None, None]:
        """`fn(*unit)` for every unit, yielded in unit order (a `TaskFailed` in place of a result
        whose worker died). At most `window` units are submitted ahead of the one being yielded.
        `on_progress(index, steps)` is called in this process for each `report_progress(steps)` of
        the unit `index`, before that unit's result is yielded (the Ray engine reports none).
        Closing the generator early (or an interruption while it waits) stops the units still
        running at once."""
        ...

    def close(self) -> None: ...

    def __enter__(self) -> Engine: ...

    def __exit__(self, *exc: object) -> None: ...


def available_cores() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def unguarded_main_call() -> tuple[str, int] | None:
    """(path, line) of the statement of the main script now running, when it stands at the script's
    top level outside any `if` (so outside `if __name__ == "__main__":`); else None.

    Worker processes started by multiprocessing's fork server (or spawn) run the main script again
    before their first unit, as module `__mp_main__`: such a statement would then start the same
    work again in every worker, each starting workers of its own. A statement under any `if` is
    taken as guarded; `python -c`, `python -m` of a package (its `__main__`), a notebook and a main
    thread not running the script (all without that re-run, or unknowable) give None."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if main is None or not isinstance(path, str) or not os.path.isfile(path):
        return None
    if str(getattr(main.__spec__, "name", "")).split(".")[-1] == "__main__":
        return None  # multiprocessing never runs a package's __main__ again
    frame = sys._current_frames().get(threading.main_thread().ident or -1)
    line = None
    while frame is not None:  # the outermost frame of the script's own top level
        if frame.f_code.co_name == "<module>" and frame.f_globals is vars(main):
            line = frame.f_lineno
        frame = frame.f_back
    if line is None:
        return None
    try:
        with open(path, "rb") as handle:
            tree = ast.parse(handle.read())
    except (OSError, SyntaxError, ValueError):
        return None
    for statement in tree.body:
        if statement.lineno <= line <= (statement.end_lineno or statement.lineno):
            return None if isinstance(statement, ast.If) else (path, line)
    return None


def warn_if_unguarded_main(fallback: str) -> bool:
    """Warn, and return True, when `unguarded_main_call` finds the script's call unguarded: the
    caller then runs without worker processes (`fallback` says how), slower but the same results."""
    where = unguarded_main_call()
    if where is None:
        return False
    path, line = where
    message = (
        f'this line calls mrcr-gen outside `if __name__ == "__main__":`; worker processes start by running '
        f"the script again, and each would start the same work: {fallback}. Put the call under that guard "
        "to use every core"
    )
    warnings.warn_explicit(message, RuntimeWarning, path, line)  # shown at the script's line
    return True
