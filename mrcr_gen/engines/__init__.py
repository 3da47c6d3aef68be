"""Engines schedule picklable units of work (a top-level function and its arguments) and yield the
results in the order the units were given. They know nothing of recipes.

- `LocalEngine`: a process pool on this machine (or the calling process itself for one worker).
- `RayEngine`: Ray tasks on a cluster (`pip install 'mrcr-gen[ray]'`); imported only when asked for.
"""

from __future__ import annotations

from ._base import Engine, TaskFailed, available_cores, report_progress
from ._local import LocalEngine
from ._make import make_engine


def __getattr__(name: str):
    if name == "RayEngine":  # imports ray: only on request
        from ._ray import RayEngine

        return RayEngine
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Engine", "LocalEngine", "RayEngine", "TaskFailed", "available_cores", "make_engine", "report_progress"]
