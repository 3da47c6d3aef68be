"""Imported first by this package's fork server (see `engines._local.ensure_fork_server`): the
server then ends at once when its caller has gone, without freeing what it preloaded.

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
import sys


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


if _starting_fork_server():
    atexit.register(_end_at_once)
