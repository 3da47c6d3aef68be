"""Picking an engine by name (`--engine`): the one module that knows every engine."""

from __future__ import annotations

from ._base import Engine


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
