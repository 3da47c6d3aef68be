"""Imported first by this package's fork server (see `engines._local.ensure_fork_server`): the
server then ends at once when its caller has gone, without freeing what it preloaded, and from the
start of its preload, not only once the preload is done:

- started from its caller's main thread, it has the kernel kill it when the caller dies (Linux), so
  a caller killed with SIGKILL does not leave it preloading for another second or more;
- it ignores Ctrl-C from the start, as the standard fork server does once it has preloaded (the
  caller handles it): pressed during the preload, it printed the server's KeyboardInterrupt traceback.

The server holds what its workers start from (a tokenizer, word pools: some 150 MB of objects).
Freeing them one by one at exit took about 0.13 s after the calling process had ended, and a
caller that reads our output through a pipe (`| tee`, a benchmark, CI) waits for every process
holding the pipe. Workers are unaffected: the server's children leave through `os._exit` already.
"""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing.forkserver
import os
import signal
import sys

from ._forked import die_with_parent

#: Set by `ensure_fork_server` to the caller's pid when it starts the server from its main thread
#: (the kernel's parent-death signal follows the thread that started a process, not the process).
PARENT_VARIABLE = "MRCR_GEN_FORK_SERVER_PARENT"
#: The server's Ctrl-C handler before this module ignored Ctrl-C: `_fork_server_ready` puts it back
#: before the standard server saves the handlers that its children start with.
interrupt_handler = signal.getsignal(signal.SIGINT)


def _end_at_once() -> None:
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
    os._exit(0)


def _starting_fork_server() -> bool:
    """Whether this import runs in a fork server's preload: its exit is then ours to shorten. Any
    other importer (a test, a documentation build) must keep its own exit and exit code."""
    frame = sys._getframe()
    while frame is not None:
        if frame.f_code is multiprocessing.forkserver.main.__code__:
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


def _die_with_caller() -> None:
    parent = os.environ.pop(PARENT_VARIABLE, "")
    if parent.isdigit() and not die_with_parent(int(parent)):
        os._exit(0)


if _starting_fork_server():
    atexit.register(_end_at_once)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_caller()
