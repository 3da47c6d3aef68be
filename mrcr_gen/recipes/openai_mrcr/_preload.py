"""Imported first by generation's fork server (see `mrcr_gen.recipes.openai_mrcr._workers.worker_preload`), so that its
workers start with the offline writer's word, phrase and sentence pools filled (shared copy-on-write)."""

from __future__ import annotations

from ._offline_words import fill_every_pool

fill_every_pool()
