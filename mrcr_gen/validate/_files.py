"""The validation pipeline: expand inputs, open each file through the recipe's reader, stream its
rows to the recipe's checker (in parallel row ranges when the recipe allows it), in row order,
with bounded memory."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from .._parquet import decoded_bytes, use_lean_memory_pool
from .._paths import find_parquet_files, hub_source
from .._tokens import DEFAULT_TOKENIZER, TokenizerError, load_tokenizer
from ..engines import Engine, LocalEngine, TaskFailed, available_cores
from ._duplicates import Duplicates
from ._findings import Finding, ReportBuilder, RowResult, ValidationReport, one_line
from ._parquet_rows import file_error
from ._provenance import SidecarBins, dataset_tokenizer
from ._spec import Batch, CheckContext, CheckSpec, FileScan

#: Inputs smaller than this (decoded, all files) are checked in-process: a pool would cost more than it saves.
POOL_MIN_BYTES = 4 << 20

ProgressCallback = Callable[[str, int, int | None], None]  # (file, rows done in this call, total rows of file)


def default_workers() -> int:
    """The cores this process may run on."""
    return available_cores()


def expand_paths(
    paths: Iterable[str | os.PathLike], csv_filter: Callable[[Path], bool] | None = None
) -> tuple[list[Path], list[Finding]]:
    """Files, directories (every `*.parquet` below, and the CSV files `csv_filter` accepts) and globs
    -> files, plus `file` findings for inputs that name nothing readable."""
    files, problems = find_parquet_files(paths, csv_filter)
    return files, [file_error(text, message) for text, message in problems]


# --- planning ------------------------------------------------------------------------------------

#: Work units aim at this many decoded bytes (about a second of tokenizing), at most UNIT_BYTES.
MIN_UNIT_BYTES = 8 << 20
UNIT_BYTES = 64 << 20
#: A worker is worth starting for this much decoded data: below it, the pool costs more than it saves.
BYTES_PER_WORKER = 32 << 20
#: Units per worker a file is cut into when it has row groups enough (for balance).
UNITS_PER_WORKER = 3
#: A file with a row group larger than this (other tools write a file as one) is checked in this
#: process: a worker would have to decode the whole group, so splitting it only multiplies that.
HUGE_ROW_GROUP_BYTES = 2 * UNIT_BYTES


def choose_workers(decoded_bytes: int, tokens: bool = True, cores: int | None = None) -> int:
    """Workers worth using for this much data: one per BYTES_PER_WORKER, at most the cores; one
    without the recount (reading and parsing alone gain little from more processes)."""
    if not tokens:
        return 1
    cores = cores or available_cores()
    return max(1, min(cores, decoded_bytes // BYTES_PER_WORKER))


def plan_units(meta: pq.FileMetaData, workers: int) -> list[tuple[int, int | None]]:
    """(first row, row count) units covering the file in order: whole row groups gathered up to a
    target size (a row group is never split: its pages would be decompressed by two workers)."""
    total = decoded_bytes(meta)
    target = min(UNIT_BYTES, max(MIN_UNIT_BYTES, total // max(1, workers * UNITS_PER_WORKER)))
    units: list[tuple[int, int | None]] = []
    first, rows, size = 0, 0, 0
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        if rows and size + group.total_byte_size > target:
            units.append((first, rows))
            first, rows, size = first + rows, 0, 0
        rows += group.num_rows
        size += group.total_byte_size
    if rows:
        units.append((first, rows))
    return units


def _largest_group(meta: pq.FileMetaData) -> int:
    return max((meta.row_group(g).total_byte_size for g in range(meta.num_row_groups)), default=0)


# --- one file --------------------------------------------------------------------------------------


@dataclass
class FileJob:
    """One input file: its scan, how its rows are checked, and whether that happens in this process."""

    path: Path
    scan: FileScan
    context: CheckContext
    tokenizer_problem: str | None  # why its tokenizer does not load (None: it loads)
    here: bool = True
    #: Checked in this process even when a local pool runs (a row group too large to share).
    keep_here: bool = False

    @property
    def shareable(self) -> bool:
        """Whether engine workers may check its row ranges."""
        return self.scan.metadata is not None and self.scan.readable and not self.keep_here


def _open_file(
    spec: CheckSpec, path: Path, tokens: bool, tokenizer: str | None, threads: int, shortcuts: bool = False
) -> FileJob:
    """Open a file through the recipe's reader and choose what recounts its tokens: `tokenizer`,
    else the one its dataset card (or sidecar) names, else o200k_base."""
    scan = spec.reader.open(path, str(path))
    if spec.whole_files:
        scan.metadata = None  # its checker sees the whole file
    recorded = dataset_tokenizer(path)
    scan.tokenizer = tokenizer or recorded or DEFAULT_TOKENIZER
    problem = _tokenizer_problem(scan.tokenizer)
    context = CheckContext(
        file=scan.file,
        count_tokens=tokens and problem is None,
        tokenizer=scan.tokenizer,
        recorded_tokenizer=recorded,
        skip_columns=frozenset(scan.unusable_columns),
        threads=threads,
        probes=shortcuts and spec.probes is not None,
    )
    return FileJob(path, scan, context, problem)


def _tokenizer_problem(spec: str) -> str | None:
    """Why the tokenizer `spec` does not load, or None when it does."""
    try:
        load_tokenizer(spec)
    except TokenizerError as exc:
        return str(exc)
    return None


def _not_counted(file: str, problem: str) -> Finding:
    """The file-level `token_bin` error of a tokenizer that does not load (its rows go uncounted)."""
    message = f"tokens not recounted: the dataset card's tokenizer cannot be loaded ({problem}); pass --tokenizer"
    return Finding(file=file, row=None, check="token_bin", severity="error", message=message)


def check_rows(
    spec: CheckSpec, path: str, context: CheckContext, first: int, count: int | None, columns: list[str] | None
) -> tuple[list[RowResult], str | None, list[Finding]]:
    """Unit of work: check rows `first` .. `first + count` of `path`, read by the worker itself, with
    a checker of its own. Returns their results, why reading failed half-way (the results then stop
    there) or None, and the checker's `finish` findings."""
    use_lean_memory_pool()
    checker = spec.checker(context)
    results: list[RowResult] = []
    try:
        for batch in spec.reader.read(Path(path), first, count, columns):
            row = first + len(results)
            results += [spec.check(checker, context, record, row + i) for i, record in enumerate(batch.to_pylist())]
    except Exception as exc:  # pyarrow raises ArrowInvalid, OSError, ... on a damaged file
        return results, one_line(exc), list(checker.finish())
    return results, None, list(checker.finish())


def _check_here(
    spec: CheckSpec, job: FileJob, progress: ProgressCallback | None
) -> Iterator[tuple[Batch, list[RowResult]]]:
    """Check a file in this process, batch by batch, by one checker."""
    scan = job.scan
    if not scan.units:
        return
    checker = spec.checker(job.context)
    row = 0
    try:
        for batch in spec.reader.read(job.path):
            results = [spec.check(checker, job.context, record, row + i) for i, record in enumerate(batch.to_pylist())]
            row += batch.num_rows
            if progress:
                progress(scan.file, batch.num_rows, scan.num_rows)
            yield batch, results
    except Exception as exc:
        scan.file_findings.append(file_error(scan.file, f"reading stopped at row {row}: {one_line(exc)}"))
    scan.closing_findings.extend(checker.finish())


def _collect(
    spec: CheckSpec, job: FileJob, outcomes: Iterator, progress: ProgressCallback | None, with_batches: bool
) -> Iterator[tuple[Batch | None, list[RowResult]]]:
    """This file's unit results in order; with batches read here to go with them."""
    scan = job.scan
    rows = spec.reader.read(job.path) if with_batches else None
    leftover: list[Batch] = []
    stopped = False
    for first, _count in scan.units:
        outcome = next(outcomes)  # always consumed, so the next file starts at its own units
        if stopped:
            continue
        if isinstance(outcome, TaskFailed):  # a worker died (e.g. out of memory)
            scan.file_findings.append(file_error(scan.file, f"checking stopped at row {first}: {outcome.message}"))
            stopped = True
            continue
        results, error, finished = outcome
        scan.closing_findings.extend(finished)
        if progress and results:
            progress(scan.file, len(results), scan.num_rows)
        if rows is None:
            yield None, results
        else:
            done = 0
            for batch in _take(rows, leftover, len(results)):
                yield batch, results[done : done + batch.num_rows]
                done += batch.num_rows
        if error is not None:
            scan.file_findings.append(file_error(scan.file, f"reading stopped at row {first + len(results)}: {error}"))
            stopped = True


def _take(batches: Iterator[Batch], leftover: list[Batch], n: int) -> Iterator[Batch]:
    """The next `n` rows of `batches` as batches; what is read beyond them waits in `leftover`."""
    while n > 0:
        batch = leftover.pop() if leftover else next(batches, None)
        if batch is None:  # the file ended early here too; the worker said why
            return
        if batch.num_rows > n:
            leftover.append(batch.slice(n))  # type: ignore[attr-defined]  # a shared file is parquet
            batch = batch.slice(0, n)  # type: ignore[attr-defined]
        n -= batch.num_rows
        yield batch


# --- running ---------------------------------------------------------------------------------------


def _local_workers(jobs: list[FileJob], tokens: bool, workers: int | None) -> int:
    """Processes for the files a pool may share: `workers`, else chosen from their size (a file with
    a huge row group stays in this process)."""
    for job in jobs:
        job.keep_here = job.scan.metadata is not None and _largest_group(job.scan.metadata) > HUGE_ROW_GROUP_BYTES
    shared = sum(decoded_bytes(job.scan.metadata) for job in jobs if job.shareable and job.scan.metadata is not None)
    chosen = choose_workers(shared, tokens) if workers is None else max(1, workers)
    return 1 if not shared or shared < POOL_MIN_BYTES else chosen


def _plan(spec: CheckSpec, jobs: list[FileJob], engine: Engine | None) -> list[tuple]:
    """Each file's units; the engine's units (one tuple of `check_rows` arguments each) of the
    files it checks, in file order."""
    units: list[tuple] = []
    for job in jobs:
        scan = job.scan
        if not scan.readable or scan.num_rows == 0:
            continue
        job.here = engine is None or not job.shareable
        if job.here:
            scan.units = [(0, scan.num_rows)]
            continue
        assert engine is not None and scan.metadata is not None
        scan.units = plan_units(scan.metadata, engine.workers)
        context = replace(job.context, threads=1)
        units += [(spec, str(job.path.absolute()), context, first, n, scan.columns) for first, n in scan.units]
    return units


def iter_validate(
    paths: Sequence[str | os.PathLike],
    *,
    spec: CheckSpec,
    tokens: bool = True,
    workers: int | None = None,
    engine: Engine | None = None,
    progress: ProgressCallback | None = None,
    on_file_start: Callable[[FileScan], None] | None = None,
    builder: ReportBuilder | None = None,
    with_batches: bool = True,
    tokenizer: str | None = None,
    csv_filter: Callable[[Path], bool] | None = None,
    shortcuts: bool = False,
) -> Iterator[tuple[FileScan, Batch | None, list[RowResult]]]:
    """Validate many inputs, yielding (file, batch, results) in row order; findings and summary
    accumulate in `builder`. An unreadable file never stops the others. Tokens are counted with
    `tokenizer`, else the one the file's dataset card names, else o200k_base.

    Rows of a file the recipe lets the pipeline cut (`spec.whole_files` off, parquet) are checked in
    units (row groups, or ranges of a large row group) that each worker reads itself, by `engine`
    (Ray, say), else by a local pool of `workers` processes (default: chosen from the data's size
    and the cores), else in this process; a whole file is checked here (with `workers` threads).
    With `with_batches` the rows come along as batches (all columns; `--clean/--fix` write them).
    `shortcuts` runs the recipe's shortcut probes on every row the checks accept (`spec.probes`).
    """
    builder = builder if builder is not None else ReportBuilder(order=spec.check_names)
    if shortcuts:
        builder.want_shortcuts()
    files, problems = expand_paths(paths, csv_filter)
    for problem in problems:
        builder.add_finding(problem)
    threads = workers or default_workers()
    jobs = [_open_file(spec, path, tokens, tokenizer, threads, shortcuts) for path in files]
    with ExitStack() as stack:
        # The probes, like the recount, are work enough to share (the checks alone are not).
        local_workers = _local_workers(jobs, tokens or shortcuts, workers) if engine is None else 1
        if engine is None and local_workers > 1:
            # No preload: summed over the processes, a fork server holding the tokenizer (to share
            # it copy-on-write) counts it once more, as RSS counts shared pages in every process.
            engine = stack.enter_context(LocalEngine(local_workers))
        units = _plan(spec, jobs, engine)
        outcomes = iter(engine.map(check_rows, units)) if engine is not None and units else iter(())
        duplicates = Duplicates()  # across the files checked together
        for job in jobs:
            if on_file_start:
                on_file_start(job.scan)
            yield from _validate_one(spec, job, outcomes, builder, tokens, progress, with_batches, duplicates)


def _validate_one(
    spec: CheckSpec,
    job: FileJob,
    outcomes: Iterator,
    builder: ReportBuilder,
    tokens: bool,
    progress: ProgressCallback | None,
    with_batches: bool,
    duplicates: Duplicates,
) -> Iterator[tuple[FileScan, Batch | None, list[RowResult]]]:
    """One file's findings into `builder` in report order (before its rows, its rows, after them),
    its rows yielded with their results."""
    scan, context = job.scan, job.context
    builder.add_file(scan.file)
    for finding in scan.early_findings:
        builder.add_finding(finding)
    if tokens and job.tokenizer_problem is not None:
        builder.add_finding(_not_counted(scan.file, job.tokenizer_problem))
    builder.add_source(scan.file, scan.tokenizer if context.count_tokens else None, hub_source(job.path))
    if spec.opening is not None and scan.readable and context.count_tokens:
        for finding in spec.opening(context):
            builder.add_finding(finding)
    sidecar = SidecarBins(job.path, scan.num_rows, spec.counted) if context.count_tokens else None
    stream = _check_here(spec, job, progress) if job.here else _collect(spec, job, outcomes, progress, with_batches)
    rows = 0
    for batch, results in stream:
        rows += len(results)
        results = [duplicates.check(result, scan.file) for result in results]
        if sidecar is not None:
            results = [sidecar.check(result, scan.file, scan.tokenizer) for result in results]
        for result in results:
            builder.add_row(result)
        yield scan, batch, results
    if scan.readable and rows == 0 and not scan.file_findings:  # a header or a schema alone: bad input
        scan.file_findings.append(file_error(scan.file, "holds no rows"))
    for finding in [*scan.closing_findings, *scan.file_findings]:
        builder.add_finding(finding)


def validate_paths(
    paths: Sequence[str | os.PathLike] | str | os.PathLike,
    *,
    spec: CheckSpec,
    tokens: bool = True,
    workers: int | None = None,
    engine: Engine | None = None,
    progress: ProgressCallback | None = None,
    strict: bool = False,
    tokenizer: str | None = None,
    csv_filter: Callable[[Path], bool] | None = None,
    shortcuts: bool = False,
) -> ValidationReport:
    """Validate files, directories, globs and hf:// paths; return every finding and the summary
    (`strict`: warnings count as errors). `tokenizer` (a spec) recounts the tokens; by default the
    one each file's dataset card names, else o200k_base. `shortcuts`: run the shortcut probes too."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    builder = ReportBuilder(strict=strict, order=spec.check_names)
    options: dict[str, Any] = {"tokens": tokens, "workers": workers, "engine": engine, "progress": progress}
    options["tokenizer"] = tokenizer
    options["shortcuts"] = shortcuts
    for _ in iter_validate(paths, spec=spec, builder=builder, with_batches=False, csv_filter=csv_filter, **options):
        pass
    return builder.build()
