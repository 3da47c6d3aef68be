"""Imported first by generation's fork server when o200k counts (see
`mrcr_gen.recipes.openai_mrcr._workers.worker_preload`), so that its workers start with it built
(shared copy-on-write)."""

from __future__ import annotations

from ._tokens import token_counter

token_counter()
