"""The one generation pipeline: a recipe's files planned into work units, run on an engine, joined,
published atomically with their sidecars, resumed after an interruption, and recorded in the
folder's dataset card. Every recipe generates through `run_job`."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from collections.abc import Callable, Generator
from dataclasses import dataclass, field, replace
from pathlib import Path

from .._card import check_folder, claim_folder, sidecar_path
from .._files import remove_partials, remove_partials_in, write_text_atomic
from ..engines import Engine, LocalEngine, TaskFailed
from ..writers._base import SharingWriter
from ._card import card_header, in_progress_card, planned_names
from ._chunks import RowChunk, plan_chunks
from ._job import GenerationJob, GenerationResult, PlannedFile, WrittenFile
from ._share import remove_stores, share_writings, writings_store
from ._units import (
    ChunkUnit,
    Join,
    JoinUnit,
    build_fingerprint,
    chunk_groups,
    join_parts,
    parts_dir,
    reusable_part,
    reusable_sidecar,
    write_chunk,
)

#: Units submitted ahead per worker: enough that the workers never wait while the calling process
#: joins a file's chunks (with two per worker they did, a third of a second per file).
JOIN_SLACK = 6

Progress = Callable[[int], None] | None


class FileFailed(RuntimeError):
    """Some files could not be written (their worker died even after retries); the others were."""

    def __init__(self, failures: list[tuple[str, str]]) -> None:
        failures = list(dict(failures).items())  # a file once, however many of its chunks failed
        self.failures = failures
        names = ", ".join(name for name, _ in failures[:5]) + (" ..." if len(failures) > 5 else "")
        super().__init__(
            f"{len(failures)} file(s) failed ({failures[0][1]}): {names}; the others are written, "
            "and rerunning the same command writes only what is missing"
        )


@dataclass
class PendingFile:
    """A file this run writes: its plan, absolute path, build fingerprint and work-unit chunks."""

    planned: PlannedFile
    path: Path
    build: str
    chunks: list[RowChunk] = field(default_factory=list)

    @property
    def parts(self) -> Path | None:
        return parts_dir(self.path, self.build, self.chunks) if len(self.chunks) > 1 else None


def check_job_folder(job: GenerationJob, overwrite: bool = False) -> None:
    """`run_job`'s refusals of its folder (`FolderTaken`, `ForeignFile`), with nothing written or
    removed: a command makes them before it starts its work (a progress bar, a check's notes)."""
    check_folder(job.out, job.generation, overwrite, *_claimed(job))


def _claimed(job: GenerationJob) -> tuple[list[str], dict[str, str]]:
    """What a job's folder claim covers: its card and files, and each data file's build fingerprint."""
    builds = {planned.relative_path: build_fingerprint(job.builder, planned) for planned in job.files}
    return [job.card_name, *planned_names(job)], builds


def run_job(
    job: GenerationJob,
    *,
    command: str = "",
    engine: Engine | None = None,
    on_rows: Progress = None,
    on_reused: Progress = None,
    overwrite: bool = False,
) -> GenerationResult:
    """Write this shard's files under `job.out`; each file appears atomically when complete.

    Work is split into units (a file, or a chunk of a large file's rows) run by `engine` (default:
    a local process pool over every core); rows are a pure function of their spec and the builder,
    so the files are byte-identical whatever the engine and worker count. A file already written
    by an identical earlier run (as its sidecar records) is kept, as is each finished chunk of an
    interrupted large file: rerunning only writes what is missing. A folder holds one generation:
    another one's card there is refused (`FolderTaken`), unless `overwrite`, which first removes
    the files that card lists. A file in the way that mrcr-gen did not write is refused
    (`ForeignFile`), with or without `overwrite`."""
    targets, builds = _claimed(job)
    claim_folder(job.out, job.generation, overwrite, targets, builds)
    remove_partials(job.out / job.card_name)  # what a run killed before this one left (the folder is ours now)
    writer = job.builder.sharing_writer()
    store = writings_store(writer, job.out, job.tokenizer) if isinstance(writer, SharingWriter) else None
    remove_stores(job.out, keep=None if overwrite else store)  # an interrupted run's cache, whatever its options
    write_text_atomic(job.out / job.card_name, in_progress_card(job))
    pending, reused = _pending_files(job, builds, on_reused)
    own_engine = engine is None
    engine = engine if engine is not None else LocalEngine(preload=job.preload)
    try:
        _Run(job, pending, engine, on_rows).run()
    finally:
        job.builder.release()
        if own_engine:
            engine.close()
        for planned in job.files:  # no unit runs now: what a writer that died or was stopped left
            path = job.out / planned.relative_path
            remove_partials(path)
            remove_partials(sidecar_path(path))
        for file in pending:  # and what a chunk's writer left among the parts kept for a rerun
            if file.parts is not None:
                remove_partials_in(file.parts)
    if store is not None:  # complete: this run's cache, if it made or found one, is no longer needed
        shutil.rmtree(store, ignore_errors=True)
    result = _written(job, reused)
    write_text_atomic(job.out / job.card_name, card_header(job) + job.card_body(result, command))
    return result


def _pending_files(
    job: GenerationJob, builds: dict[str, str], on_reused: Progress
) -> tuple[list[PendingFile], dict[Path, list[dict]]]:
    """The files still to write, and the sidecar records of those an identical run completed."""
    pending: list[PendingFile] = []
    reused: dict[Path, list[dict]] = {}
    for planned in job.files:
        # Absolute: workers (other processes, other nodes of a cluster) may run in another folder.
        path = (job.out / planned.relative_path).absolute()
        build = builds[planned.relative_path]
        records = reusable_sidecar(path, build, len(planned.rows))
        if records is None:
            pending.append(PendingFile(planned, path, build))
            continue
        reused[path] = records
        if on_reused is not None:
            on_reused(len(records))
    return pending, reused


def _written(job: GenerationJob, reused: dict[Path, list[dict]]) -> GenerationResult:
    """Every file of the shard as written, with its sidecar records."""
    files = []
    for planned in job.files:
        path = job.out / planned.relative_path
        records = reused.get(path.absolute())
        if records is None:
            records = [json.loads(line) for line in sidecar_path(path).read_text(encoding="utf-8").splitlines()]
        kept = tuple({k: v for k, v in r.items() if k not in ("build", "tokenizer")} for r in records)
        files.append(WrittenFile(path=path, relative_path=planned.relative_path, records=kept, planned=planned))
    return GenerationResult(files=tuple(files))


class _Run:
    """One run of the pending files' units on an engine, joining large files as their parts finish."""

    def __init__(self, job: GenerationJob, pending: list[PendingFile], engine: Engine, on_rows: Progress) -> None:
        self.job, self.pending, self.engine, self.on_rows = job, pending, engine, on_rows
        self.failures: list[tuple[str, str]] = []
        self.joins: dict[Path, Join] = {}
        self.rows_shown = Counter[int]()  # rows of each unit that its worker reported done

    def run(self) -> None:
        units = self._plan_units()
        runner = self._runner(units)
        store = None
        try:
            store = share_writings(
                self.job.builder.sharing_writer(), [u.rows for u in units], runner, self.job.out, self.job.tokenizer
            )
            units = [replace(unit, store=store) for unit in units]
            self._run_units(runner, units)
            self._finish_joins(runner)
        finally:
            for join in self.joins.values():
                join.abort()
        if self.failures:
            raise FileFailed(self.failures)

    def _plan_units(self) -> list[ChunkUnit]:
        """Every chunk still to write (a finished part of an interrupted run is kept)."""
        files = [file.planned for file in self.pending]
        chunking = plan_chunks([f.rows for f in files], self.engine.workers, [f.whole for f in files])
        units = []
        for file, chunks in zip(self.pending, chunking, strict=True):
            file.chunks = chunks
            parts = file.parts
            if parts is not None:
                self.joins[file.path] = Join(self.job.builder, file.path, parts, len(chunks))
            groups = chunk_groups(file.planned.rows, chunks)
            for k, rows in enumerate(chunks):
                if parts is not None and reusable_part(parts, k, len(rows)):
                    self._show(len(rows))
                    continue
                units.append(
                    ChunkUnit(self.job.builder, file.planned, rows, file.build, file.path, parts, k, groups[k])
                )
        return units

    def _runner(self, units: list[ChunkUnit]) -> Engine:
        if isinstance(self.engine, LocalEngine) and len(units) + len(self.joins) <= 1:
            return LocalEngine(1)  # one unit of work: a pool would only add its start-up
        return self.engine

    def _show(self, rows: int) -> None:
        if self.on_rows is not None:
            self.on_rows(rows)

    def _show_unit(self, index: int, rows: int) -> None:
        self.rows_shown[index] += rows
        self._show(rows)

    def _run_units(self, runner: Engine, units: list[ChunkUnit]) -> None:
        """Run the units; a local engine's parts are on this machine, so this process joins each
        file while its chunks are still being generated, and no join waits at the end."""
        join_here = isinstance(runner, LocalEngine)
        units_left = Counter(unit.path for unit in units)
        # Units return nothing, so many can wait ahead: workers keep busy while this process joins.
        outcomes: Generator[object, None, None] = runner.map(
            write_chunk, [(u,) for u in units], window=JOIN_SLACK * runner.workers, on_progress=self._show_unit
        )
        try:
            for index, (unit, outcome) in enumerate(zip(units, outcomes, strict=True)):
                units_left[unit.path] -= 1
                if isinstance(outcome, TaskFailed):
                    self.failures.append((str(unit.path), outcome.message))
                    if unit.path in self.joins:  # the file cannot be completed: stop joining it
                        self.joins.pop(unit.path).abort()
                    continue
                if len(unit.rows) > self.rows_shown[index]:
                    self._show(len(unit.rows) - self.rows_shown[index])
                if join_here and unit.path in self.joins:
                    self._advance_join(unit.path, done=not units_left[unit.path])
        finally:
            outcomes.close()  # when interrupted: the engine stops the units still running

    def _advance_join(self, path: Path, done: bool) -> None:
        if not done:
            self.joins[path].advance()
            return
        self.joins.pop(path).finish()

    def _finish_joins(self, runner: Engine) -> None:
        """Join the files whose every chunk is written but which are not joined yet: here with a
        local engine (files finished by an earlier run), else as units of their own."""
        pending = list(self.joins.values())
        if isinstance(runner, LocalEngine):
            for join in pending:
                join.finish()
                del self.joins[join.path]
            return
        units = [JoinUnit(self.job.builder, join.path, join.parts, join.count) for join in pending]
        for unit, outcome in zip(units, runner.map(join_parts, [(u,) for u in units]), strict=True):
            del self.joins[unit.path]
            if isinstance(outcome, TaskFailed):
                self.failures.append((str(unit.path), outcome.message))
            else:  # the file is in place now
                shutil.rmtree(unit.parts, ignore_errors=True)
