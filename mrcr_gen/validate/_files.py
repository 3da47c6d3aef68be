"""File-level validation: expand inputs, check the parquet schema, stream record batches and
check rows in parallel, in row order, with bounded memory."""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from .._parquet import MRCR_SCHEMA
from .._paths import find_parquet_files, hub_source
from .._tokens import DEFAULT_TOKENIZER, TokenizerError, load_tokenizer
from ._checks import INT_COLUMNS, _check_row_task, check_row
from ._findings import Finding, ReportBuilder, RowResult, ValidationReport
from ._provenance import SidecarBins, dataset_tokenizer

#: Target decoded size of one record batch. Rows hold up to ~4 MB of prompt each, so this is
#: a few rows: memory stays flat however large the file is.
BATCH_BYTES = 8 << 20
#: Files smaller than this (decoded) are checked in-process: a pool would cost more than it saves.
POOL_MIN_BYTES = 4 << 20
#: Rows queued or being checked per pool worker, at most (plus one batch being read).
IN_FLIGHT_PER_WORKER = 3

ProgressCallback = Callable[[str, int, int], None]  # (file, rows done in this call, total rows of file)


def default_workers() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


# --- inputs ------------------------------------------------------------------------------------


def expand_paths(paths: Iterable[str | os.PathLike]) -> tuple[list[Path], list[Finding]]:
    """Files, directories (every `*.parquet` below) and globs -> files, plus `file` findings for
    inputs that name nothing readable."""
    files, problems = find_parquet_files(paths)
    return files, [_file_error(text, message) for text, message in problems]


def _file_error(file: str, message: str) -> Finding:
    return Finding(file=file, row=None, check="file", severity="error", message=message)


# --- schema ------------------------------------------------------------------------------------


def check_schema(schema: pa.Schema, file: str) -> tuple[list[Finding], set[str]]:
    """File-level `schema` findings, and the columns rows cannot use (missing or wrongly typed)."""
    findings: list[Finding] = []
    unusable: set[str] = set()
    names = set(schema.names)
    for expected in MRCR_SCHEMA:
        if expected.name not in names:
            findings.append(
                Finding(file=file, row=None, check="schema", severity="error", message=f"column {expected.name!r} is missing")
            )
            unusable.add(expected.name)
            continue
        actual = schema.field(expected.name).type
        if actual == expected.type:
            continue
        if expected.name in INT_COLUMNS:
            acceptable = pa.types.is_integer(actual)
        else:
            acceptable = pa.types.is_string(actual) or pa.types.is_large_string(actual)
        severity = "warning" if acceptable else "error"
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
        if name not in MRCR_SCHEMA.names:
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
    tokenizer: str = DEFAULT_TOKENIZER  # what recounts the file's tokens

    @property
    def schema_ok(self) -> bool:
        return not any(f.check == "schema" and f.is_error for f in self.file_findings)


def _open(path: Path, scan: FileScan) -> pq.ParquetFile | None:
    try:
        if path.stat().st_size == 0:
            scan.file_findings.append(_file_error(scan.file, "file is empty (0 bytes), not a parquet file"))
            return None
        parquet = pq.ParquetFile(path, pre_buffer=False, buffer_size=1 << 20)
    except Exception as exc:  # pyarrow raises ArrowInvalid, OSError, ... on bad input
        scan.file_findings.append(_file_error(scan.file, f"cannot read as parquet: {_one_line(exc)}"))
        return None
    scan.schema = parquet.schema_arrow
    scan.num_rows = parquet.metadata.num_rows
    return parquet


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def _batch_rows(parquet: pq.ParquetFile) -> int:
    """Rows per record batch so that one batch decodes to about BATCH_BYTES."""
    per_row = _decoded_bytes(parquet) / max(1, parquet.metadata.num_rows)
    return max(1, min(1024, int(BATCH_BYTES // max(1.0, per_row))))


def _decoded_bytes(parquet: pq.ParquetFile) -> int:
    meta = parquet.metadata
    return sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))


def scan_file(
    path: str | os.PathLike,
    *,
    tokens: bool = True,
    executor: Executor | None = None,
    workers: int = 1,
    progress: ProgressCallback | None = None,
    scan: FileScan | None = None,
    tokenizer: str = DEFAULT_TOKENIZER,
) -> Iterator[tuple[pa.RecordBatch, list[RowResult]]]:
    """Yield each record batch with the results of its rows, in row order.

    File-level findings (unreadable, schema, a read failure half-way) land in `scan.file_findings`.
    With an executor, rows are checked in its workers while the next batch is read; at most
    `IN_FLIGHT_PER_WORKER` rows per worker are held at once.
    """
    path = Path(path)
    scan = scan if scan is not None else FileScan(file=str(path))
    parquet = _open(path, scan)
    if parquet is None:
        return
    with parquet:
        schema_findings, unusable = check_schema(scan.schema, scan.file)
        scan.file_findings.extend(schema_findings)
        scan.unusable_columns = unusable
        skip = frozenset(unusable)
        if executor is not None and _decoded_bytes(parquet) < POOL_MIN_BYTES:
            executor = None
        batch_size = _batch_rows(parquet)
        if executor is not None:
            batch_size = max(1, min(batch_size, workers))
        file = scan.file
        row = 0
        in_flight = 0
        pending: deque[tuple[pa.RecordBatch, list[Future] | list[RowResult]]] = deque()
        batches = parquet.iter_batches(batch_size=batch_size, use_threads=False)
        try:
            for batch in batches:
                if executor is None:
                    results = [
                        check_row(record, file=file, row=row + i, count_tokens=tokens, skip_columns=skip, tokenizer=tokenizer)
                        for i, record in enumerate(batch.to_pylist())
                    ]
                    row += batch.num_rows
                    if progress:
                        progress(file, batch.num_rows, scan.num_rows)
                    yield batch, results
                    continue
                futures = [
                    executor.submit(
                        _check_row_task, (batch.slice(i, 1).to_pylist()[0], file, row + i, tokens, skip, tokenizer)
                    )
                    for i in range(batch.num_rows)
                ]
                row += batch.num_rows
                pending.append((batch, futures))
                in_flight += batch.num_rows
                # Keep every worker fed (rows differ 4x in size) yet hold only a few rows.
                while in_flight > IN_FLIGHT_PER_WORKER * workers:
                    done_batch, done = pending.popleft()
                    in_flight -= done_batch.num_rows
                    results = [f.result() for f in done]
                    if progress:
                        progress(file, done_batch.num_rows, scan.num_rows)
                    yield done_batch, results
        except Exception as exc:
            scan.file_findings.append(_file_error(file, f"reading stopped at row {row}: {_one_line(exc)}"))
        try:
            while pending:
                done_batch, done = pending.popleft()
                results = [f.result() for f in done]
                if progress:
                    progress(file, done_batch.num_rows, scan.num_rows)
                yield done_batch, results
        except Exception as exc:  # a worker died (e.g. out of memory): report, never a traceback
            scan.file_findings.append(_file_error(file, f"checking stopped: {_one_line(exc)}"))


# --- process pool ------------------------------------------------------------------------------


def make_executor(workers: int) -> ProcessPoolExecutor | None:
    """A pool of `workers` processes with o200k preloaded, or None for in-process checking."""
    if workers <= 1:
        return None
    from ._worker import init_worker

    if sys.platform.startswith("linux"):
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["mrcr_gen.validate._worker"])
    else:
        context = multiprocessing.get_context("spawn")
    return ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=init_worker)


class _LazyExecutor:
    """Starts the pool only when a file large enough to need it comes along."""

    def __init__(self, workers: int, stack: ExitStack):
        self.workers = workers
        self.stack = stack
        self._executor: ProcessPoolExecutor | None = None

    def get(self) -> ProcessPoolExecutor | None:
        if self._executor is None and self.workers > 1:
            self._executor = make_executor(self.workers)
            if self._executor is not None:
                self.stack.callback(self._executor.shutdown, wait=True, cancel_futures=True)
        return self._executor


# --- reports -----------------------------------------------------------------------------------


def iter_validate(
    paths: Sequence[str | os.PathLike],
    *,
    tokens: bool = True,
    workers: int | None = None,
    progress: ProgressCallback | None = None,
    on_file_start: Callable[[FileScan], None] | None = None,
    builder: ReportBuilder | None = None,
    tokenizer: str | None = None,
) -> Iterator[tuple[FileScan, pa.RecordBatch, list[RowResult]]]:
    """Validate many inputs, yielding (file, batch, results) as they come; findings and summary
    accumulate in `builder`. An unreadable file never stops the others. Tokens are counted with
    `tokenizer`, else the one the file's dataset card names, else o200k_base."""
    workers = default_workers() if workers is None else max(1, workers)
    builder = builder if builder is not None else ReportBuilder()
    files, problems = expand_paths(paths)
    for problem in problems:
        builder.add_finding(problem)
    with ExitStack() as stack:
        lazy = _LazyExecutor(workers if tokens else 1, stack)
        for path in files:
            scan = FileScan(file=str(path))
            builder.add_file(scan.file)
            executor = None
            if lazy.workers > 1 and _worth_a_pool(path):
                executor = lazy.get()
            if on_file_start:
                on_file_start(scan)
            spec = scan.tokenizer = tokenizer or dataset_tokenizer(path) or DEFAULT_TOKENIZER
            count = tokens and _loads(spec, scan.file, builder)
            builder.add_source(scan.file, spec if count else None, hub_source(path))
            sidecar = SidecarBins(path, _num_rows(path)) if count else None
            for batch, results in scan_file(
                path, tokens=count, executor=executor, workers=workers, progress=progress, scan=scan, tokenizer=spec
            ):
                if sidecar is not None:
                    results = [sidecar.check(result, scan.file, spec) for result in results]
                for result in results:
                    builder.add_row(result)
                yield scan, batch, results
            for finding in scan.file_findings:
                builder.add_finding(finding)


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


def _worth_a_pool(path: Path) -> bool:
    try:
        with pq.ParquetFile(path) as parquet:
            return _decoded_bytes(parquet) >= POOL_MIN_BYTES
    except Exception:
        return False


def validate_paths(
    paths: Sequence[str | os.PathLike] | str | os.PathLike,
    *,
    tokens: bool = True,
    workers: int | None = None,
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
    for _ in iter_validate(paths, tokens=tokens, workers=workers, progress=progress, builder=builder, tokenizer=tokenizer):
        pass
    return builder.build()


def validate_file(
    path: str | os.PathLike,
    *,
    tokens: bool = True,
    workers: int | None = None,
    progress: ProgressCallback | None = None,
    strict: bool = False,
    tokenizer: str | None = None,
) -> ValidationReport:
    """Validate one parquet file (streamed; tokens recounted over `workers` processes)."""
    return validate_paths([path], tokens=tokens, workers=workers, progress=progress, strict=strict, tokenizer=tokenizer)
