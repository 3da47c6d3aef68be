"""Imported first by a local pool's fork server (see `mrcr_gen._generate.WORKER_PRELOAD`), so that
generation workers start with the offline writer's word pools built (shared copy-on-write)."""

from __future__ import annotations

from ._offline import _pools

_pools()
