"""Imported by generation's fork server after the generator and the tokenizer (see
`mrcr_gen.recipes.openai_mrcr._workers.worker_preload`), so that its workers start with the offline
writer's word, phrase and sentence pools filled (shared copy-on-write): the pools the child of
`_preload_start` rendered meanwhile, or rendered here (without that child, or when it failed)."""

from __future__ import annotations

from ._offline_words import install_pools
from ._preload_start import RENDERING

install_pools(RENDERING.result())
