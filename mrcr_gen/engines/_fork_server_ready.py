"""Imported last by this package's fork server (see `engines._local.ensure_fork_server`), once it has
imported what its workers start from: those objects are moved out of the garbage collector's reach
(`gc.freeze`). They live as long as the server anyway; otherwise each worker's first full collection
walks them all (some 25 ms, and a copy of every page it touches: the objects' headers are written),
and every later one again. Ctrl-C, which `_fork_server` ignored during the preload, gets its handler
back here, before the standard server saves the handlers its children start with."""

from __future__ import annotations

import gc
import signal

from . import _fork_server

gc.freeze()
if _fork_server.interrupt_handler is not None:
    # The standard server saves its handlers now, for the children it forks: theirs, as before.
    signal.signal(signal.SIGINT, _fork_server.interrupt_handler)
