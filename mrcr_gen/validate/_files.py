"""File-level validation: expand inputs, check the parquet schema, stream record batches and
check rows in parallel, in row order, with bounded memory."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from .._parquet import batch_rows, decoded_bytes, use_lean_memory_pool
from .._paths import find_parquet_files, hub_source
from .._tokens import DEFAULT_TOKENIZER, TokenizerError, load_tokenizer
from ..engines import Engine, LocalEngine, TaskFailed, available_cores
from ._findings import Finding, ReportBuilder, RowResult, Severity, ValidationReport
from ._provenance import SidecarBins, dataset_tokenizer
from ._spec import RowChecks

#: Target decoded size of one record batch. Rows hold up to ~4 MB of prompt each, so this is
#: a few rows: memory stays flat however large the file is.
BATCH_BYTES = 8 << 20
#: Inputs smaller than this (decoded, all files) are checked in-process: a pool would cost more than it saves.
POOL_MIN_BYTES = 4 << 20

ProgressCallback = Callable[[str, int, int], None]  # (file, rows done in this call, total rows of file)


def default_workers() -> int:
    """The cores this process may run on."""
    return available_cores()


# --- inputs ------------------------------------------------------------------------------------


def expand_paths(paths: Iterable[str | os.PathLike]) -> tuple[list[Path], list[Finding]]:
    """Files, directories (every `*.parquet` below) and globs -> files, plus `file` findings for
    inputs that name nothing readable."""
    files, problems = find_parquet_files(paths)
    return files, [_file_error(text, message) for text, message in problems]


def _file_error(file: str, message: str) -> Finding:
    return Finding(file=file, row=None, check="file", severity="error", message=message)


# --- schema ------------------------------------------------------------------------------------


def check_schema(schema: pa.Schema, file: str, rows: RowChecks) -> tuple[list[Finding], set[str]]:
    """File-level `schema` findings against the recipe's `rows.schema`, and the columns rows cannot
    use (missing or wrongly typed)."""
    findings: list[Finding] = []
    unusable: set[str] = set()
    names = set(schema.names)
    for expected in rows.schema:
        if expected.name not in names:
            findings.append(
                Finding(
                    file=file,
                    row=None,
                    check="schema",
                    severity="error",
                    message=f"column {expected.name!r} is missing",
                )
            )
            unusable.add(expected.name)
            continue
        actual = schema.field(expected.name).type
        if actual == expected.type:
            continue
        if expected.name in rows.int_columns:
            acceptable = pa.types.is_integer(actual)
        else:
            acceptable = pa.types.is_string(actual) or pa.types.is_large_string(actual)
        severity: Severity = "warning" if acceptable else "error"
        if not acceptable:
            unusable.add(expected.name)
        findings.append(
            Finding(
                file=file,
                row=None,
                check="schema",
                severity=severity,
                message=f"column {expected.name!r} has type {actual}, expected {expected.type}",
            )
        )
    for name in schema.names:
        if name not in rows.schema.names:
            findings.append(
                Finding(file=file, row=None, check="schema", severity="warning", message=f"extra column {name!r}")
            )
    return findings, unusable


# --- streaming ---------------------------------------------------------------------------------


@dataclass
class FileScan:
    """The state of one file being validated (filled in while iterating `batches`)."""

    file: str
    schema: pa.Schema | None = None
    num_rows: int = 0
    file_findings: list[Finding] = field(default_factory=list)
    unusable_columns: set[str] = field(default_factory=set)
    metadata: pq.FileMetaData | None = None
    units: list[tuple[int, int]] = field(default_factory=list)  # (first row, rows) checked together
    tokenizer: str = DEFAULT_TOKENIZER  # what recounts the file's tokens

    @property
    def schema_ok(self) -> bool:
        return not any(f.check == "schema" and f.is_error for f in self.file_findings)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def read_range(
    path: str | os.PathLike, first: int = 0, count: int | None = None, *, columns: list[str] | None = None
) -> Iterator[pa.RecordBatch]:
    """Rows `first` .. `first + count` of a parquet file in small record batches (about
    BATCH_BYTES decoded each), reading only the row groups that hold them: memory stays flat
    however large the file or its row groups are."""
    with pq.ParquetFile(path, pre_buffer=False, buffer_size=1 << 20) as parquet:
        meta = parquet.metadata
        end = meta.num_rows if count is None else min(meta.num_rows, first + count)
        groups, position, row = [], None, 0
        for g in range(meta.num_row_groups):
            n = meta.row_group(g).num_rows
            if row + n > first and row < end and n:
                position = row if position is None else position
                groups.append(g)
            row += n
        if position is None:
            return
        batches = parquet.iter_batches(
            batch_size=batch_rows(parquet.metadata, BATCH_BYTES), row_groups=groups, columns=columns, use_threads=False
        )
        for batch in batches:
            lo, hi = max(first - position, 0), min(end - position, batch.num_rows)
            if hi > lo:
                yield batch if (lo, hi) == (0, batch.num_rows) else batch.slice(lo, hi - lo)
            position += batch.num_rows
            if position >= end:
                return


def check_rows(
    rows: RowChecks,
    path: str,
    file: str,
    first: int,
    count: int,
    tokens: bool,
    skip: frozenset[str],
    columns: list[str] | None,
    tokenizer: str = DEFAULT_TOKENIZER,
) -> tuple[list[RowResult], str | None]:
    """Unit of work: check rows `first` .. `first + count` of `path`, read by the worker itself.
    Returns their results and, if reading failed half-way, why (the results then stop there)."""
    use_lean_memory_pool()
    results: list[RowResult] = []
    try:
        for batch in read_range(path, first, count, columns=columns):
            row = first + len(results)
            results += [
                rows.check_row(
                    record, file=file, row=row + i, count_tokens=tokens, skip_columns=skip, tokenizer=tokenizer
                )
                for i, record in enumerate(batch.to_pylist())
            ]
    except Exception as exc:  # pyarrow raises ArrowInvalid, OSError, ... on a damaged file
        return results, _one_line(exc)
    return results, None


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


def plan_units(meta: pq.FileMetaData, workers: int) -> list[tuple[int, int]]:
    """(first row, row count) units covering the file in order: whole row groups gathered up to a
    target size (a row group is never split: its pages would be decompressed by two workers)."""
    total = decoded_bytes(meta)
    target = min(UNIT_BYTES, max(MIN_UNIT_BYTES, total // max(1, workers * UNITS_PER_WORKER)))
    units: list[tuple[int, int]] = []
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


def _plan_file(path: Path, rows: RowChecks) -> FileScan:
    """Open a file's footer: schema findings and row count, no data read."""
    scan = FileScan(file=str(path))
    try:
        if path.stat().st_size == 0:
            scan.file_findings.append(_file_error(scan.file, "file is empty (0 bytes), not a parquet file"))
            return scan
        with pq.ParquetFile(path) as parquet:
            scan.schema = parquet.schema_arrow
            scan.num_rows = parquet.metadata.num_rows
            scan.metadata = parquet.metadata
    except Exception as exc:  # pyarrow raises ArrowInvalid, OSError, ... on bad input
        scan.file_findings.append(_file_error(scan.file, f"cannot read as parquet: {_one_line(exc)}"))
        return scan
    findings, scan.unusable_columns = check_schema(scan.schema, scan.file, rows)
    scan.file_findings.extend(findings)
    return scan


# --- running ---------------------------------------------------------------------------------------


def iter_validate(
    paths: Sequence[str | os.PathLike],
    *,
    rows: RowChecks,
    tokens: bool = True,
    workers: int | None = None,
    engine: Engine | None = None,
    progress: ProgressCallback | None = None,
    on_file_start: Callable[[FileScan], None] | None = None,
    builder: ReportBuilder | None = None,
    with_batches: bool = True,
    tokenizer: str | None = None,
) -> Iterator[tuple[FileScan, pa.RecordBatch | None, list[RowResult]]]:
    """Validate many inputs, yielding (file, batch, results) in row order; findings and summary
    accumulate in `builder`. An unreadable file never stops the others. Tokens are counted with
    `tokenizer`, else the one the file's dataset card names, else o200k_base.

    Rows are checked in units (row groups, or ranges of a large row group) that each worker reads
    itself, by `engine` (Ray, say), else by a local pool of `workers` processes (default: chosen
    from the data's size and the cores), else in this process. With `with_batches` the rows come
    along as record batches (all columns; `--clean/--fix` write them), read here.
    """
    builder = builder if builder is not None else ReportBuilder()
    files, problems = expand_paths(paths)
    for problem in problems:
        builder.add_finding(problem)
    scans = [(path, _plan_file(path, rows)) for path in files]
    for path, scan in scans:
        scan.tokenizer = tokenizer or dataset_tokenizer(path) or DEFAULT_TOKENIZER
    here: set[str] = set()  # files checked in this process
    local_workers = 1
    if engine is None:
        for _, scan in scans:
            if scan.metadata is not None and _largest_group(scan.metadata) > HUGE_ROW_GROUP_BYTES:
                here.add(scan.file)
        shared = sum(decoded_bytes(s.metadata) for _, s in scans if s.metadata is not None and s.file not in here)
        local_workers = choose_workers(shared, tokens) if workers is None else max(1, workers)
        if not shared or shared < POOL_MIN_BYTES:
            local_workers = 1
    with ExitStack() as stack:
        if engine is None and local_workers > 1:
            # No preload: summed over the processes, a fork server holding the tokenizer (to share
            # it copy-on-write) counts it once more, as RSS counts shared pages in every process.
            engine = stack.enter_context(LocalEngine(local_workers))
        units: list[tuple] = []
        for path, scan in scans:
            if scan.metadata is not None and scan.schema is not None and scan.num_rows:
                if engine is None or scan.file in here:
                    scan.units = [(0, scan.num_rows)]
                    here.add(scan.file)
                    continue
                scan.units = plan_units(scan.metadata, engine.workers)
                columns = [c for c in rows.schema.names if c in scan.schema.names]
                skip = frozenset(scan.unusable_columns)
                count = tokens and _tokenizer_loads(scan.tokenizer)
                units += [
                    (rows, str(path.absolute()), scan.file, first, n, count, skip, columns, scan.tokenizer)
                    for first, n in scan.units
                ]
        outcomes = iter(engine.map(check_rows, units)) if engine is not None and units else iter(())
        for path, scan in scans:
            builder.add_file(scan.file)
            if on_file_start:
                on_file_start(scan)
            spec = scan.tokenizer
            count = tokens and _loads(spec, scan.file, builder)
            builder.add_source(scan.file, spec if count else None, hub_source(path))
            sidecar = SidecarBins(path, _num_rows(path)) if count else None
            if scan.file in here:
                stream = _check_here(rows, path, scan, count, progress)
            else:
                stream = _collect(path, scan, outcomes, progress, with_batches)
            for batch, results in stream:
                if sidecar is not None:
                    results = [sidecar.check(result, scan.file, spec) for result in results]
                for result in results:
                    builder.add_row(result)
                yield scan, batch, results
            for finding in scan.file_findings:
                builder.add_finding(finding)


def _tokenizer_loads(spec: str) -> bool:
    try:
        load_tokenizer(spec)
    except TokenizerError:
        return False
    return True


def _loads(spec: str, file: str, builder: ReportBuilder) -> bool:
    """Whether the tokenizer loads; if not, a file-level `token_bin` error says so (rows go uncounted)."""
    try:
        load_tokenizer(spec)
    except TokenizerError as exc:
        message = f"tokens not recounted: the dataset card's tokenizer cannot be loaded ({exc}); pass --tokenizer"
        builder.add_finding(Finding(file=file, row=None, check="token_bin", severity="error", message=message))
        return False
    return True


def _num_rows(path: Path) -> int:
    try:
        with pq.ParquetFile(path) as parquet:
            return parquet.metadata.num_rows
    except Exception:
        return -1


def _check_here(
    rows: RowChecks, path: Path, scan: FileScan, tokens: bool, progress: ProgressCallback | None
) -> Iterator[tuple[pa.RecordBatch, list[RowResult]]]:
    """Check a file in this process, batch by batch."""
    if not scan.units:
        return
    skip = frozenset(scan.unusable_columns)
    row = 0
    try:
        for batch in read_range(path):
            results = [
                rows.check_row(
                    record,
                    file=scan.file,
                    row=row + i,
                    count_tokens=tokens,
                    skip_columns=skip,
                    tokenizer=scan.tokenizer,
                )
                for i, record in enumerate(batch.to_pylist())
            ]
            row += batch.num_rows
            if progress:
                progress(scan.file, batch.num_rows, scan.num_rows)
            yield batch, results
    except Exception as exc:
        scan.file_findings.append(_file_error(scan.file, f"reading stopped at row {row}: {_one_line(exc)}"))


def _collect(
    path: Path, scan: FileScan, outcomes: Iterator, progress: ProgressCallback | None, with_batches: bool
) -> Iterator[tuple[pa.RecordBatch | None, list[RowResult]]]:
    """This file's unit results in order; with batches read here to go with them."""
    rows = read_range(path) if with_batches else None
    leftover: list[pa.RecordBatch] = []
    stopped = False
    for first, _count in scan.units:
        outcome = next(outcomes)  # always consumed, so the next file starts at its own units
        if stopped:
            continue
        if isinstance(outcome, TaskFailed):  # a worker died (e.g. out of memory)
            scan.file_findings.append(_file_error(scan.file, f"checking stopped at row {first}: {outcome.message}"))
            stopped = True
            continue
        results, error = outcome
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
            scan.file_findings.append(_file_error(scan.file, f"reading stopped at row {first + len(results)}: {error}"))
            stopped = True


def _take(batches: Iterator[pa.RecordBatch], leftover: list[pa.RecordBatch], n: int) -> Iterator[pa.RecordBatch]:
    """The next `n` rows of `batches` as batches; what is read beyond them waits in `leftover`."""
    while n > 0:
        batch = leftover.pop() if leftover else next(batches, None)
        if batch is None:  # the file ended early here too; the worker said why
            return
        if batch.num_rows > n:
            leftover.append(batch.slice(n))
            batch = batch.slice(0, n)
        n -= batch.num_rows
        yield batch


def validate_paths(
    paths: Sequence[str | os.PathLike] | str | os.PathLike,
    *,
    rows: RowChecks,
    tokens: bool = True,
    workers: int | None = None,
    engine: Engine | None = None,
    progress: ProgressCallback | None = None,
    strict: bool = False,
    tokenizer: str | None = None,
) -> ValidationReport:
    """Validate files, directories, globs and hf:// paths; return every finding and the summary
    (`strict`: warnings count as errors). `tokenizer` (a spec) recounts the tokens; by default the
    one each file's dataset card names, else o200k_base."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    builder = ReportBuilder(strict=strict)
    for _ in iter_validate(
        paths,
        rows=rows,
        tokens=tokens,
        workers=workers,
        engine=engine,
        progress=progress,
        builder=builder,
        with_batches=False,
        tokenizer=tokenizer,
    ):
        pass
    return builder.build()


def validate_file(
    path: str | os.PathLike,
    *,
    rows: RowChecks,
    tokens: bool = True,
    workers: int | None = None,
    engine: Engine | None = None,
    progress: ProgressCallback | None = None,
    strict: bool = False,
    tokenizer: str | None = None,
) -> ValidationReport:
    """Validate one parquet file (streamed; tokens recounted over `workers` processes)."""
    return validate_paths(
        [path],
        rows=rows,
        tokens=tokens,
        workers=workers,
        engine=engine,
        progress=progress,
        strict=strict,
        tokenizer=tokenizer,
    )
