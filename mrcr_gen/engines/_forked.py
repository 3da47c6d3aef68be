"""A value computed in a short-lived forked child while this process goes on with other work
(`compute_forked`): a fork server's preload renders one thing in a child while it imports and
loads another, on the second core that would otherwise wait.

The child is never needed for a correct result: whatever goes wrong (no fork, the child killed or
failing, a torn or unreadable reply), `Forked.result` computes the value here, as without it."""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")

#: Linux's prctl option: a signal the kernel sends this process when its parent dies.
PR_SET_PDEATHSIG = 1
#: A child that has not handed its value back after this many seconds is killed, and the value
#: computed here (it takes a fraction of a second; a child stuck for this long never ends).
PATIENCE = 60.0


def die_with_parent(parent: int | None = None) -> bool:
    """On Linux, have the kernel kill this process (SIGKILL) the moment its parent dies. With
    `parent`, the pid this process was started by: False when that parent is gone already (it
    died before the signal was set, which then never comes), and this process should end."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    return parent is None or os.getppid() == parent


class Forked(Generic[T]):
    """`compute()`, being computed in the child `pid` (None: not started) that writes its pickle to `fd`."""

    def __init__(self, compute: Callable[[], T], pid: int | None = None, fd: int | None = None) -> None:
        self._compute, self._pid, self._fd = compute, pid, fd

    def result(self) -> T:
        """The child's value once it has sent it and ended well; else `compute()` here."""
        handed = self._take()
        return self._compute() if handed is None else handed[0]

    def _take(self) -> tuple[T] | None:
        if self._pid is None or self._fd is None:
            return None
        pid, self._pid = self._pid, None
        try:
            data = _read_all(self._fd, time.monotonic() + PATIENCE)
            _, status = os.waitpid(pid, 0)
            if not data or os.waitstatus_to_exitcode(status) != 0:
                return None
            return (pickle.loads(data),)
        except Exception:  # whatever the child left: the value is computed here instead
            with contextlib.suppress(ChildProcessError, OSError):
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            return None


def _read_all(fd: int, deadline: float) -> bytes:
    """Everything written to `fd` until its writer closes it; TimeoutError after `deadline`."""
    chunks: list[bytes] = []
    with os.fdopen(fd, "rb", buffering=0) as reply:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([reply], [], [], left)[0]:
                raise TimeoutError("the forked child did not hand its value back")
            chunk = reply.read(1 << 20)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)


def _other_threads() -> bool:
    return threading.active_count() > 1


def compute_forked(compute: Callable[[], T]) -> Forked[T]:
    """`compute()` started in a forked child, which hands its value back through a pipe and ends;
    the child dies with this process. Call only while this process runs no other thread (a fork
    copies just the calling one: with other threads, it is computed at `result()`, here), and read
    the value with `result()` once, in this process."""
    if not hasattr(os, "fork") or _other_threads():
        return Forked(compute)
    read, write = os.pipe()
    parent = os.getpid()
    try:
        pid = os.fork()
    except OSError:
        os.close(read)
        os.close(write)
        return Forked(compute)
    if pid == 0:  # the child: it never returns, and leaves through os._exit (no atexit, no flush of ours)
        code = 1
        try:
            os.close(read)
            if die_with_parent(parent):
                data = pickle.dumps(compute(), protocol=pickle.HIGHEST_PROTOCOL)
                with os.fdopen(write, "wb") as out:
                    out.write(data)
                code = 0
        finally:
            os._exit(code)
    os.close(write)
    return Forked(compute, pid, read)
