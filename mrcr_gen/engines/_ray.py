"""The Ray engine: one Ray task per unit, on the cluster at `address` (or $RAY_ADDRESS), else on
a local Ray instance started with this machine's cores. Ray retries a task whose worker died
(`max_retries`); what still fails comes back as `TaskFailed`."""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Generator, Iterable
from typing import Any

from ._base import TaskFailed, available_cores

#: Ray's own default for tasks, spelled out: a task whose worker or node died is run again this often.
MAX_RETRIES = 3


class RayEngine:
    name = "ray"

    def __init__(
        self, address: str | None = None, *, num_cpus: int | None = None, max_retries: int = MAX_RETRIES
    ) -> None:
        try:
            import ray
        except ImportError:
            raise RuntimeError("--engine ray needs Ray: pip install 'mrcr-gen[ray]'") from None
        self._ray = ray
        self.max_retries = max_retries
        self._started = False
        if not ray.is_initialized():
            address = address or os.environ.get("RAY_ADDRESS") or None
            options: dict[str, Any] = {"logging_level": "warning", "log_to_driver": True}
            if address is None:  # a local instance of our own, with this machine's cores
                options.update(num_cpus=num_cpus or available_cores(), include_dashboard=False)
            ray.init(address=address, **options)
            self._started = True
        self.workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
        self._remote: dict[Callable, Any] = {}

    def _task(self, fn: Callable[..., Any]) -> Any:
        if fn not in self._remote:
            self._remote[fn] = self._ray.remote(max_retries=self.max_retries)(fn)
        return self._remote[fn]

    def map(
        self,
        fn: Callable[..., Any],
        units: Iterable[tuple],
        *,
        window: int | None = None,
        on_progress: Callable[[int, int], None] | None = None,
    ) -> Generator[Any, None, None]:
        # Tasks report no progress before they end (`on_progress` is never called): a channel
        # from every task would be an actor, a process of its own on the cluster.
        ray = self._ray
        task = self._task(fn)
        window = window or 2 * self.workers
        pending: deque[tuple[int, Any]] = deque()
        queue = iter(enumerate(units))
        try:
            while True:
                while len(pending) < window:
                    item = next(queue, None)
                    if item is None:
                        break
                    pending.append((item[0], task.remote(*item[1])))
                if not pending:
                    return
                index, ref = pending.popleft()
                try:
                    yield ray.get(ref)
                except ray.exceptions.RayTaskError as exc:
                    # The unit's own exception (bad input, say): the caller handles it as locally.
                    cause = getattr(exc, "cause", None)
                    if isinstance(cause, Exception):
                        raise cause from None
                    raise
                except ray.exceptions.RayError as exc:  # worker or node died after every retry
                    first = str(exc).strip().splitlines()
                    yield TaskFailed(index, f"{type(exc).__name__}: {first[0] if first else ''}".rstrip(": "))
        finally:
            for _, ref in pending:
                ray.cancel(ref)

    def close(self) -> None:
        if self._started:
            self._ray.shutdown()
            self._started = False

    def __enter__(self) -> RayEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
