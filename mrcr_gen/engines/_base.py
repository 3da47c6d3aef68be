"""What every engine offers, and how to pick one."""

from __future__ import annotations

import os
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
