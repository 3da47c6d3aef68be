"""The cache's registry of batches folders (`pool/_inflight.py`): entries of folders gone for a day
are removed; an entry of a folder being made, or of one that exists, is kept."""

from __future__ import annotations

import os
import time

from mrcr_gen.pool._inflight import REGISTRY_NAME, STALE_AFTER_S, in_other_batches, register_folder


def entries(cache):
    return sorted(p.read_text().strip() for p in (cache / REGISTRY_NAME).iterdir())


def test_only_entries_of_folders_gone_for_a_day_are_removed(tmp_path):
    cache = tmp_path / "cache"
    kept, fresh, gone = tmp_path / "kept.batches", tmp_path / "fresh.batches", tmp_path / "gone.batches"
    kept.mkdir()
    for folder in (kept, fresh, gone):
        register_folder(cache, folder)
    old = time.time() - STALE_AFTER_S - 60
    for entry in (cache / REGISTRY_NAME).iterdir():
        if entry.read_text().strip() != str(fresh.resolve()):
            os.utime(entry, (old, old))
    assert in_other_batches(cache) == {}  # no folder holds a batch
    assert entries(cache) == sorted(str(p.resolve()) for p in (kept, fresh))  # the fresh one may be in the making
    register_folder(cache, gone)  # a build that comes back names its folder again
    assert str(gone.resolve()) in entries(cache)
