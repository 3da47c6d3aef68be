"""Imported last by this package's fork server (see `engines._local.ensure_fork_server`), once it has
imported what its workers start from: those objects are moved out of the garbage collector's reach
(`gc.freeze`). They live as long as the server anyway; otherwise each worker's first full collection
walks them all (some 25 ms, and a copy of every page it touches: the objects' headers are written),
and every later one again."""

from __future__ import annotations

import gc

gc.freeze()
