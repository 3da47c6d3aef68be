"""The Ray engine: one Ray task per unit, on the cluster at `address` (or $RAY_ADDRESS), else on
a local Ray instance started with this machine's cores. Ray retries a task whose worker died
(`max_retries`); what still fails comes back as `TaskFailed`."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator
from typing import Any

from .._files import discard, publish, publishing_deferred
from ._base import TaskFailed, available_cores

#: Ray's own default for tasks, spelled out: a task whose worker or node died is run again this often.
MAX_RETRIES = 3
#: How often a task's process checks that its raylet is still there (seconds).
PARENT_POLL = 0.1
#: Seconds to wait for a cluster at a given address before giving up (Ray itself retries for
#: minutes); $MRCR_GEN_RAY_CONNECT_TIMEOUT overrides it.
CONNECT_TIMEOUT = 30.0


def connect_timeout() -> float:
    try:
        return max(1.0, float(os.environ.get("MRCR_GEN_RAY_CONNECT_TIMEOUT", CONNECT_TIMEOUT)))
    except ValueError:
        return CONNECT_TIMEOUT


def check_reachable(address: str, timeout: float) -> None:
    """ConnectionError, in one line, unless `address` (host:port, or ray://host:port) accepts a TCP
    connection within `timeout` seconds. Other forms ("auto") are left to Ray. (Ray would retry a
    refused connection for minutes, a line on the standard error each time.)"""
    host, colon, port = address.removeprefix("ray://").rpartition(":")
    if not colon or not port.isdigit():
        return
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except OSError as exc:
        reason = f"no answer within {timeout:g} s" if isinstance(exc, TimeoutError) else exc.strerror or str(exc)
        raise ConnectionError(f"no Ray cluster at {address} ({reason or type(exc).__name__})") from None


@contextlib.contextmanager
def _bounded_ray_connect(timeout: float) -> Iterator[None]:
    """Within: Ray gives up connecting to a cluster after about `timeout` seconds, rather than
    after 20 attempts of 40 s each (settings the user made are left alone). Ray's core reads them
    as it is imported: in a process that imported Ray before, only the first applies."""
    bounds = {
        "RAY_gcs_server_port_wait_time_s": "1",  # attempts: one
        "RAY_gcs_rpc_server_connect_timeout_s": str(max(1, int(timeout // 4))),
        "RAY_py_gcs_connect_timeout_s": str(max(1, int(timeout // 2))),
    }
    added = [name for name in bounds if name not in os.environ]
    os.environ.update({name: bounds[name] for name in added})
    try:
        yield
    finally:
        for name in added:
            os.environ.pop(name, None)


@contextlib.contextmanager
def _stderr_held() -> Iterator[None]:
    """Within: what is written to the standard error (by Ray's C++ core too, which retries with a
    line per attempt) is held back; shown once the block succeeds, dropped when it fails."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        failed = True
        try:
            yield
            failed = False
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            if not failed:
                held.seek(0)
                sys.stderr.write(held.read().decode(errors="replace"))
                sys.stderr.flush()


@contextlib.contextmanager
def _own_sigterm_handler_kept() -> Iterator[None]:
    """ray.init installs a SIGTERM handler of its own (sys.exit): the one in place before (the
    command's, which stops as Ctrl-C does) is put back."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


def process_identity(pid: int) -> tuple[int, str] | None:
    """(pid, start time) of a live process, which a later process reusing the pid does not share;
    None when it is gone. Without /proc (not Linux) the start time is left empty."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            # Field 22 is the start time; fields 3 on follow the name, which may hold spaces.
            return pid, stat.read().rsplit(b")", 1)[1].split()[19].decode()
    except FileNotFoundError:
        if not os.path.isdir("/proc/self"):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return None
            except PermissionError:
                pass
            return pid, ""
        return None
    except (OSError, IndexError):
        return None


#: Whether this worker watches its raylet and driver already (set by the first unit it runs).
_watched = False


def _run_unit(driver: tuple[int, str] | None, fn: Callable[..., Any], *args: Any) -> Any:
    """A unit as a Ray task: `fn(*args)`, in a worker process that ends as soon as its raylet, or
    the driver of the local instance (`driver`, from `process_identity`), is gone. Ray kills a
    local instance's raylet with the process that started it (even killed with SIGKILL), but
    that can take seconds on a loaded machine and a worker would finish the unit it runs first.
    Returns the result and the files the unit finished, which the driver moves into place when
    it takes the result (`mrcr_gen._files.publishing_deferred`): once the driver is gone, no file
    of a task appears, however late its worker ends."""
    global _watched
    if not _watched:  # a worker runs the tasks of one driver, under one raylet
        raylet = os.getppid()

        def orphaned() -> bool:  # the parent changes when it dies
            return os.getppid() != raylet or (driver is not None and process_identity(driver[0]) != driver)

        def watch() -> None:
            while not orphaned():
                time.sleep(PARENT_POLL)
            os._exit(1)

        _watched = True
        threading.Thread(target=watch, name="mrcr-gen raylet watch", daemon=True).start()
    with publishing_deferred() as moves:
        return fn(*args), moves


class RayEngine:
    name = "ray"

    def __init__(
        self, address: str | None = None, *, num_cpus: int | None = None, max_retries: int = MAX_RETRIES
    ) -> None:
        address = address or os.environ.get("RAY_ADDRESS") or None
        timeout = connect_timeout()
        # Ray's core reads its connection timeouts as it is imported: bounded before that.
        with _bounded_ray_connect(timeout) if address is not None else contextlib.nullcontext():
            try:
                import ray
            except ImportError:
                raise RuntimeError("--engine ray needs Ray: pip install 'mrcr-gen[ray]'") from None
            self._ray = ray
            self.max_retries = max_retries
            self._started = False
            # Set for a local instance of our own only: its tasks run on this machine and end with this process.
            self._driver: tuple[int, str] | None = None
            if not ray.is_initialized():
                options: dict[str, Any] = {"logging_level": "warning", "log_to_driver": True}
                with _own_sigterm_handler_kept():
                    if address is None:  # a local instance of our own, with this machine's cores
                        options.update(num_cpus=num_cpus or available_cores(), include_dashboard=False)
                        ray.init(**options)
                        self._driver = process_identity(os.getpid())
                    else:
                        self._connect(address, options, timeout)
                self._started = True
        self.workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
        self._remote: dict[Callable, Any] = {}

    def _connect(self, address: str, options: dict[str, Any], timeout: float) -> None:
        """ray.init at `address`, or a one-line ConnectionError after about `timeout` seconds."""
        check_reachable(address, timeout)  # a wrong port or host fails here, at once
        try:
            with _stderr_held():
                self._ray.init(address=address, **options)
        except (ConnectionError, RuntimeError):  # something answers there, but no Ray cluster
            self._ray.shutdown()
            raise ConnectionError(f"no Ray cluster answered at {address} within {timeout:g} s") from None

    def _task(self, fn: Callable[..., Any]) -> Any:
        """A remote function calling `fn` (see `_run_unit`), named after it in Ray's listings."""
        if fn not in self._remote:
            task = self._ray.remote(max_retries=self.max_retries)(_run_unit)
            self._remote[fn] = task.options(name=getattr(fn, "__name__", "unit"))
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
                    pending.append((item[0], task.remote(self._driver, fn, *item[1])))
                if not pending:
                    return
                index, ref = pending.popleft()
                try:
                    result, moves = ray.get(ref)
                except ray.exceptions.RayTaskError as exc:
                    # The unit's own exception (bad input, say): the caller handles it as locally.
                    cause = getattr(exc, "cause", None)
                    if isinstance(cause, Exception):
                        raise cause from None
                    raise
                except ray.exceptions.RayError as exc:  # worker or node died after every retry
                    first = str(exc).strip().splitlines()
                    yield TaskFailed(index, f"{type(exc).__name__}: {first[0] if first else ''}".rstrip(": "))
                    continue
                publish(moves)  # here, by the driver: a dead driver puts no file in place
                yield result
        finally:
            for _, ref in pending:
                ray.cancel(ref)
            self._discard_unreceived([ref for _, ref in pending])

    def _discard_unreceived(self, refs: list[Any]) -> None:
        """Remove the files of the tasks that ended but whose results were not taken."""
        ray = self._ray
        if not refs or not ray.is_initialized():  # shut down first: its results are gone with it
            return
        ended, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        for ref in ended:
            with contextlib.suppress(ray.exceptions.RayError):
                discard(ray.get(ref)[1])

    def close(self) -> None:
        if self._started:
            self._ray.shutdown()
            self._started = False

    def __enter__(self) -> RayEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
