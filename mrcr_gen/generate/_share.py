"""The shared-writings cache: writings that every worker would compose, composed once for the job
and spread over the workers, into parts under the output folder that every worker reads."""

from __future__ import annotations

import hashlib
import json
import math
import re
import shutil
from collections.abc import Sequence
from pathlib import Path

from .._tokens import DEFAULT_TOKENIZER
from .._version import __version__
from ..engines import Engine
from ..writers._base import SharingWriter
from ._chunks import RowChunk, _row_tokens

#: Tokens of a row's bin (its upper edge) per distractor pair it draws, about (offline writer:
#: 2,100 pairs in a row of the 1M bin), to foresee how many pairs a job draws.
PAIR_TOKENS = 500
#: Share when the workers, each composing what it draws, would compose this many times the
#: writings that composing them once costs.
SHARE_WHEN = 1.2
#: Shared writings composed per work unit.
SHARED_PART_KEYS = 2048
#: The caches' names: `.writings-` and 16 hex digits of what determines their writings.
STORE_PREFIX = ".writings-"
STORE_NAME = re.compile(r"\.writings-[0-9a-f]{16}")


def share_writings(
    writer: SharingWriter | None,
    chunks: Sequence[RowChunk],
    engine: Engine,
    out: Path,
    tokenizer: str = DEFAULT_TOKENIZER,
) -> Path | None:
    """When the job draws so many distractor pairs that every worker would compose most of the
    writer's shared writings, compose them once instead, spread over the workers, into parts under
    `out` that every worker reads. None when not worth it (or the writer cannot)."""
    if engine.workers < 2 or not isinstance(writer, SharingWriter):
        return None
    tokens = sum(_row_tokens(spec) for rows in chunks for spec in rows)
    n_keys, workers = len(writer.shared_keys()), engine.workers
    # Each worker draws tokens / PAIR_TOKENS / workers pairs uniformly from n_keys writings.
    composed_alone = workers * (1 - math.exp(-tokens / PAIR_TOKENS / workers / n_keys))
    if composed_alone < SHARE_WHEN:
        return None
    from .._parquet import read_arrow_rows  # pyarrow loads for a job that shares its writings

    store = writings_store(writer, out, tokenizer)
    parts = shared_parts(n_keys, workers)
    # A part an earlier run left is kept when whole (parts are not fsynced: a crash may cut one short).
    whole = {start for start, stop in parts if read_arrow_rows(store / f"{start}.arrow") == stop - start}
    units = [(writer, start, stop, store) for start, stop in parts if start not in whole]
    # Every part queued at once: they finish in any order, and a window behind the oldest part left
    # a worker idle while the other composed it (0.08 s at the end of the 1M job's sharing).
    for _ in engine.map(compose_shared, units, window=max(1, len(units))):
        pass  # a part that failed is composed by the workers that need it, as without sharing
    return store


def shared_parts(n_keys: int, workers: int) -> list[tuple[int, int]]:
    """The (start, stop) parts of `n_keys` shared writings: SHARED_PART_KEYS each, but the last
    `workers` parts' worth, which is cut in quarters. Every worker waits for the last part before
    its rows; small last parts end close together, so no worker waits long for another's."""
    big_parts = max(0, math.ceil((n_keys - workers * SHARED_PART_KEYS) / SHARED_PART_KEYS))
    parts = [(start, start + SHARED_PART_KEYS) for start in range(0, big_parts * SHARED_PART_KEYS, SHARED_PART_KEYS)]
    start = big_parts * SHARED_PART_KEYS
    step = max(1, math.ceil((n_keys - start) / (4 * workers)))
    return parts + [(s, min(s + step, n_keys)) for s in range(start, n_keys, step)]


def writings_store(writer: SharingWriter, out: Path, tokenizer: str = DEFAULT_TOKENIZER) -> Path:
    """The folder under `out` where the shared writings of `writer` (counted by `tokenizer`) go."""
    key = json.dumps([__version__, writer.describe(), tokenizer], sort_keys=True, default=str)
    return out.absolute() / f"{STORE_PREFIX}{hashlib.sha256(key.encode()).hexdigest()[:16]}"


def remove_stores(out: Path, keep: Path | None = None) -> None:
    """Remove the shared-writings caches under `out` but `keep`: what an interrupted run left, with
    whatever options (a run that completes removes its own)."""
    for store in out.glob(f"{STORE_PREFIX}*"):
        if store.is_dir() and STORE_NAME.fullmatch(store.name) and store.absolute() != keep:
            shutil.rmtree(store, ignore_errors=True)


def compose_shared(writer: SharingWriter, start: int, stop: int, store: Path) -> None:
    """Work unit: compose and count shared writings `start:stop` into a part under `store`."""
    writer.compose_part(start, stop, store)
