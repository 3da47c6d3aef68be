"""What every engine offers, and how to pick one."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol


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

    def map(self, fn: Callable[..., Any], units: Iterable[tuple], *, window: int | None = None) -> Iterator[Any]:
        """`fn(*unit)` for every unit, yielded in unit order (a `TaskFailed` in place of a result
        whose worker died). At most `window` units are submitted ahead of the one being yielded."""
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


def make_engine(
    kind: str = "local",
    *,
    workers: int | None = None,
    address: str | None = None,
    preload: tuple[str, ...] = (),
) -> Engine:
    """`local` (a process pool of `workers`, default all cores) or `ray` (the cluster at `address`,
    else $RAY_ADDRESS, else a local Ray instance started with `workers` or all cores)."""
    if kind == "local":
        from ._local import LocalEngine

        return LocalEngine(workers, preload=preload)
    if kind == "ray":
        from ._ray import RayEngine

        return RayEngine(address=address, num_cpus=workers)
    raise ValueError(f"unknown engine {kind!r}; choose local or ray")
