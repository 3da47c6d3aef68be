"""How a job's files are cut into work units: a whole file, or chunks of a large file's rows that
free workers share (their parts are joined in order afterwards)."""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import Any, Protocol

#: Chunks of a file cut for balance (see `plan_chunks`) hold about an eighth of a worker's part of
#: the job, within these decoded bytes: enough to be worth a unit, and at most two dozen rows of
#: the 1M bin (a chunk is held whole by its worker, then joined, see `Join`). An eighth, not a
#: third: the calling process joins the file as its parts arrive, so small parts keep
#: it close behind the workers; with thirds it went on alone for a second or more after them (100
#: rows of the 1M bin, 2 workers), and each worker held twice the rows.
UNITS_PER_WORKER = 8
MIN_UNIT_BYTES = 4 << 20
UNIT_BYTES = 128 << 20
#: Upper estimate of decoded bytes per token of a row (JSON-escaped English), to size units before
#: the rows exist.
BYTES_PER_TOKEN = 5
#: A generated file's row groups: consecutive rows within this many bytes by that estimate (a row
#: of the 1M bin alone, a few hundred of the 4k bin). Cut from the specs, before the rows exist, so
#: that a chunk built anywhere ends where a group ends: its worker writes its groups compressed,
#: and the file is their bytes joined (see `Join`), the same bytes however the rows were cut.
GROUP_BYTES = 8 << 20


class SizedSpec(Protocol):
    """What the core reads of a recipe's row spec: the most tokens its row can have."""

    @property
    def max_tokens(self) -> int: ...


RowChunk = tuple[Any, ...]


def _row_tokens(spec: SizedSpec) -> int:
    return spec.max_tokens


def _row_bytes(spec: SizedSpec) -> int:
    return _row_tokens(spec) * BYTES_PER_TOKEN


def plan_chunks(files: Sequence[Sequence[SizedSpec]], workers: int, whole: Sequence[bool] = ()) -> list[list[RowChunk]]:
    """Each file's rows cut into work units, for workers that take the units in order: the whole
    file, unless it would end after the moment every worker ends when the work is spread evenly
    (a file larger than a worker's part of the job, or one of the last files). Such a file is cut
    into chunks, of at most UNIT_BYTES and a fraction of a worker's part, that the free workers
    share. A whole file costs least: its worker writes it in place, where a chunked file's parts
    are written, then copied into it by its join. How rows are cut never changes the bytes.
    A file marked in `whole` (its rows are built in one sequence) is never cut."""
    sizes = [sum(map(_row_bytes, rows)) for rows in files]
    planned = sum(sizes)
    chunk = min(UNIT_BYTES, max(MIN_UNIT_BYTES, planned // (workers * UNITS_PER_WORKER)))
    free_at = [0] * workers  # when each worker is done with the units planned so far (a heap)
    plan = []
    for i, (rows, size) in enumerate(zip(files, sizes, strict=True)):
        keep = (i < len(whole) and whole[i]) or (free_at[0] + size) * workers <= planned
        units = [tuple(rows)] if keep else split_groups(rows, chunk)
        for unit in units:
            heapq.heapreplace(free_at, free_at[0] + sum(map(_row_bytes, unit)))
        plan.append(units)
    return plan


def row_groups(rows: Sequence[SizedSpec]) -> list[RowChunk]:
    """The row groups of a generated file (or of a chunk of one that starts where a group starts)."""
    return split_rows(rows, GROUP_BYTES)


def split_groups(rows: Sequence[SizedSpec], target: int) -> list[RowChunk]:
    """Consecutive whole row groups (`row_groups`) in chunks of about `target` estimated bytes."""
    return _pack(row_groups(rows), target)


def split_rows(rows: Sequence[SizedSpec], target: int = UNIT_BYTES) -> list[RowChunk]:
    """Consecutive rows in chunks of about `target` decoded bytes (estimated from their token targets)."""
    return _pack([(spec,) for spec in rows], target)


def _pack(runs: Sequence[RowChunk], target: int) -> list[RowChunk]:
    """Consecutive runs of rows, each kept whole, in chunks of about `target` estimated bytes: a
    run joins the chunk before it unless that would pass `target` (a run alone may)."""
    chunks: list[RowChunk] = []
    current: list[SizedSpec] = []
    size = 0
    for run in runs:
        estimate = sum(map(_row_bytes, run))
        if current and size + estimate > target:
            chunks.append(tuple(current))
            current, size = [], 0
        current.extend(run)
        size += estimate
    if current:
        chunks.append(tuple(current))
    return chunks
