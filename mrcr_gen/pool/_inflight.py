"""Which writings of a cache are in batches that have not been collected yet, whichever build made them.

A batches folder (`pool build --batch`'s `<pool>.batches/`, MRCR v2's in the cache) names itself in
its cache (`<cache>/batch-folders/<hash of its path>`: the folder's path) before its first request
line is written. Any command that would send writings of that cache (another pool's batch build,
`pool export-requests`) reads those folders and leaves out every custom_id (a writing's cache key)
of a batch whose replies are not stored yet: the writing is paid for (or will be) once, by the
batch that holds it. A folder that is gone, or whose record cannot be read, holds nothing; the
entry of a folder gone for a day is removed (a day: a build names its folder in the registry a
moment before it makes it, and this must never remove the entry of a build under way).
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

from .._files import write_text_atomic
from ..batch import STATE_NAME, BatchError, BatchFolder

REGISTRY_NAME = "batch-folders"
STALE_AFTER_S = 86_400.0  # an entry whose folder is gone is removed this long after it was written


def register_folder(cache_dir: str | os.PathLike, folder: Path) -> None:
    """Name `folder` in the cache at `cache_dir` as one whose batches hold writings of it."""
    path = Path(folder).resolve()
    entry = Path(cache_dir) / REGISTRY_NAME / hashlib.sha256(str(path).encode()).hexdigest()[:24]
    if not entry.is_file():
        entry.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(entry, f"{path}\n")


def in_other_batches(cache_dir: str | os.PathLike, besides: Path | None = None) -> dict[str, Path]:
    """custom_id -> folder of every writing of the cache in a batch not collected yet (not made,
    running, or ended with its replies not yet stored), in any registered folder but `besides`."""
    registry = Path(cache_dir) / REGISTRY_NAME
    skip = None if besides is None else Path(besides).resolve()
    found: dict[str, Path] = {}
    for entry in sorted(registry.iterdir()) if registry.is_dir() else ():
        try:
            folder = Path(entry.read_text(encoding="utf-8").strip())
        except OSError:  # removed by another reader meanwhile
            continue
        if not folder.exists():
            _remove_if_stale(entry)
        if folder == skip or not (folder / STATE_NAME).is_file():
            continue
        try:
            batches = BatchFolder(folder)
            for part in batches.state.parts:
                if not part.graded:
                    found.update(dict.fromkeys(batches.part_ids(part), folder))
        except (BatchError, OSError):  # a record no build can continue holds nothing it will collect
            continue
    return found


def _remove_if_stale(entry: Path) -> None:
    """Remove the registry entry of a folder that is gone, once it is older than STALE_AFTER_S."""
    try:
        if time.time() - entry.stat().st_mtime > STALE_AFTER_S:
            entry.unlink()
    except OSError:  # another reader removed it first
        pass
