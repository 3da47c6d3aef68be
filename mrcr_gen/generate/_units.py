"""The work units of a generation and what they leave on disk: a whole file with its sidecar, or a
chunk of a large file's rows as a part, joined in order into the file (`Join`). Also what makes a
finished file reusable by a rerun: its build fingerprint, recorded on every sidecar line."""

from __future__ import annotations

import hashlib
import itertools
import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._card import sidecar_path
from .._counts import sealed_sidecar
from .._files import write_text_atomic
from .._tokens import load_tokenizer
from .._version import __version__
from ..engines import report_progress
from ._chunks import RowChunk, row_groups
from ._job import FileBuilder, FileJoin, PlannedFile


@dataclass(frozen=True)
class ChunkUnit:
    """Work unit: `rows` of `file`, written as the whole file `path` (`parts` None) or as part
    `index` under `parts`, in row groups of `groups` rows (see `chunk_groups`); `store` holds
    writings composed ahead for the job (or is None)."""

    builder: FileBuilder
    file: PlannedFile
    rows: RowChunk
    build: str
    path: Path
    parts: Path | None
    index: int
    groups: tuple[int, ...]
    store: Path | None = None


def chunk_groups(file_rows: Sequence[Any], chunks: Sequence[RowChunk]) -> list[tuple[int, ...]]:
    """The row groups of each chunk of a file: the file's groups (`row_groups`, planned from all its
    rows) within the chunk's rows. Chunks cut where groups end (`plan_chunks`) give a file the bytes
    one unit writing it whole would; a group that a chunk cuts becomes two."""
    ends = set(itertools.accumulate(len(group) for group in row_groups(file_rows)))
    plan, start = [], 0
    for chunk in chunks:
        stop = start + len(chunk)
        cuts = [start, *sorted(end for end in ends if start < end < stop), stop]
        plan.append(tuple(b - a for a, b in itertools.pairwise(cuts)))
        start = stop
    return plan


@dataclass(frozen=True)
class JoinUnit:
    """Work unit: the file `path` from the `count` finished parts under `parts`."""

    builder: FileBuilder
    path: Path
    parts: Path
    count: int


def write_chunk(unit: ChunkUnit) -> None:
    """Work unit: generate the unit's rows; write them as the whole file with its sidecar, or, when
    the file has several chunks, as part `index`: its row groups, compressed, that the join copies
    byte for byte (see `Join`)."""
    if unit.parts is None:
        sidecar_path(unit.path).unlink(missing_ok=True)  # see Join.advance
        records, digest = _write_rows(unit, unit.path, durable=True)
        write_sealed_sidecar(records, unit.path, unit.builder.tokenizer, digest)
        return
    # A part is scratch, not fsynced (a rerun after a crash checks it with `reusable_part`); its
    # records last: they mark it finished.
    records, _ = _write_rows(unit, part_path(unit.parts, unit.index), durable=False)
    write_text_atomic(unit.parts / f"{unit.index}.jsonl", "".join(records), durable=False)


def _write_rows(unit: ChunkUnit, path: Path, durable: bool) -> tuple[list[str], str | None]:
    """The unit's rows written to `path` in its row groups; their sidecar lines, and the file's
    sha256 when its writer computed it as it wrote."""
    counted_by = load_tokenizer(unit.builder.tokenizer).describe()["spec"]
    records: list[str] = []
    sink = unit.builder.open_file(path, unit.groups, durable=durable)
    try:
        for batch in unit.builder.batches(unit.file, unit.rows, unit.store):
            report_progress(len(batch.records))
            records.extend(sidecar_line(unit.build, record, counted_by) for record in batch.records)
            sink.add(batch.data)
    except BaseException:
        sink.abort()
        raise
    sink.close()
    return records, getattr(sink, "sha256", None)


def sidecar_line(build: str, record: dict[str, Any], tokenizer: str) -> str:
    return json.dumps({"build": build, **record, "tokenizer": tokenizer}) + "\n"


def join_parts(unit: JoinUnit) -> None:
    """Work unit: the file from its finished parts, in order. The parts stay: the engine's caller
    moves the file into place when it takes the result, and removes them after."""
    Join(unit.builder, unit.path, unit.parts, unit.count).write()


class Join:
    """A large file from its finished parts, in order, as they finish (see `advance`): their row
    groups' bytes copied, under one footer."""

    def __init__(self, builder: FileBuilder, path: Path, parts: Path, count: int) -> None:
        self.builder, self.path, self.parts, self.count = builder, path, parts, count
        self._added = 0
        self._records: list[str] = []
        self._file: FileJoin | None = None

    def advance(self) -> None:
        """Add the parts finished so far that follow the last one added."""
        while self._added < self.count and (records := finished_part(self.parts, self._added)) is not None:
            if self._file is None:
                # The sidecar vouches for the file beside it: drop the old one before the file
                # is replaced, or a crash in between would leave it vouching for different rows.
                sidecar_path(self.path).unlink(missing_ok=True)
                self._file = self.builder.join_file(self.path)
            self._file.add(part_path(self.parts, self._added))
            self._records.append(records)
            self._added += 1

    def finish(self) -> None:
        """Put the file and its sidecar in place once every part is added; then the parts go."""
        self.write()
        shutil.rmtree(self.parts, ignore_errors=True)

    def write(self) -> None:
        """Write the file and its sidecar once every part is added (see `finish`)."""
        self.advance()
        if self._added < self.count:
            raise FileNotFoundError(f"part {self._added} of {self.path} is missing from {self.parts}")
        assert self._file is not None
        file, self._file = self._file, None
        digest = file.close()
        lines = "".join(self._records).splitlines()
        write_sealed_sidecar(lines, self.path, self.builder.tokenizer, digest)

    def abort(self) -> None:
        """Drop the file being joined, if any (its parts stay for a rerun)."""
        if self._file is not None:
            file, self._file = self._file, None
            file.abort()


def write_sealed_sidecar(lines: list[str], path: Path, tokenizer: str, digest: str | None) -> None:
    """The sidecar of the file just written, sealed to it (by the sha256 its writer computed as it
    wrote, when it did: `RowGroupWriter(digest=True)`, else read from the file)."""
    write_text_atomic(sidecar_path(path), sealed_sidecar(lines, path, tokenizer, digest))


def part_path(parts: Path, index: int) -> Path:
    """Where part `index` of a large file waits to be joined: named so that no glob of the
    folder's data files (`**/*.parquet`) takes it for one, even after an interrupted run."""
    return parts / f"{index}.part"


def parts_dir(path: Path, build: str, chunks: Sequence[RowChunk]) -> Path:
    """Where a large file's chunks wait to be joined: named by its build and its chunking, so a
    rerun with another chunking (another worker count) never mixes parts."""
    cut = hashlib.sha256(json.dumps([len(c) for c in chunks]).encode()).hexdigest()[:8]
    return path.with_name(f".{path.name.removesuffix('.parquet')}.{build}.{cut}.parts")


def finished_part(parts: Path, index: int) -> str | None:
    try:
        if part_path(parts, index).is_file():
            return (parts / f"{index}.jsonl").read_text(encoding="utf-8")
    except OSError:
        pass
    return None


def reusable_part(parts: Path, index: int, n_rows: int) -> bool:
    """Whether an earlier run finished part `index` of `n_rows` rows whole: its parts are not
    fsynced, so after a crash of the machine one may be cut short. One that is not is removed, so
    that no join reads it before this run writes it again."""
    from .._parquet import parquet_rows  # pyarrow loads for a job cut into parts, not for every job

    records = finished_part(parts, index)
    if records is None:
        return False
    if len(records.splitlines()) == n_rows and parquet_rows(part_path(parts, index)) == n_rows:
        return True
    for name in (f"{index}.jsonl", part_path(parts, index).name):  # the marker first: a part without it is unfinished
        (parts / name).unlink(missing_ok=True)
    return False


def build_fingerprint(builder: FileBuilder, file: PlannedFile) -> str:
    """What determines a file's bytes: the mrcr-gen version and the recipe's `build_key`."""
    key = json.dumps([__version__, *builder.build_key(file)], sort_keys=True, default=str)
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def reusable_sidecar(path: Path, build: str, n_rows: int) -> list[dict] | None:
    """The sidecar records of a complete file from an identical run, else None."""
    sidecar = sidecar_path(path)
    if not (path.is_file() and sidecar.is_file()):
        return None
    try:
        records = [json.loads(line) for line in sidecar.read_text(encoding="utf-8").splitlines()]
        if len(records) != n_rows or any(not isinstance(r, dict) or r.get("build") != build for r in records):
            return None
        if path.suffix == ".parquet":
            from .._parquet import parquet_rows  # pyarrow loads for a parquet file, not for a CSV one

            if parquet_rows(path) != n_rows:
                return None
    except (OSError, ValueError):  # unreadable or torn json (the data file: see parquet_rows)
        return None
    return records
