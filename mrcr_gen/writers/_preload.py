"""Imported first by generation's fork server (see `mrcr_gen._generate.WORKER_PRELOAD`), so that its
workers start with o200k built and the offline writer's word pools filled (shared copy-on-write)."""

from __future__ import annotations

from .._tokens import token_counter
from ._offline import _pools

token_counter()
_pools()
