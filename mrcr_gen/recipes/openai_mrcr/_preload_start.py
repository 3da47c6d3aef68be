"""Imported by generation's fork server before the heavy imports (see `_workers.worker_preload`):
a forked child renders the offline writer's pools (a third of a second of CPU) while the server
imports the generator and loads the tokenizer; `_preload` then takes them (pickled, ~7 MB, read
in 0.03 s), or renders them itself if the child failed."""

from __future__ import annotations

from ...engines._forked import compute_forked
from ._offline_words import every_pool

RENDERING = compute_forked(every_pool)
