"""Dataset generation: plan rows into files, assemble them, write parquet, sidecars and a card."""

from __future__ import annotations

import hashlib
import heapq
import json
import math
import secrets
import shutil
from collections import Counter
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ..._card import claim_folder, sidecar_path
from ..._files import remove_partials, write_text_atomic
from ..._parquet import ROW_GROUP_BYTES, RowGroupWriter, read_arrow, write_arrow_atomic, write_row_groups
from ..._tokens import DEFAULT_TOKENIZER, load_tokenizer
from ..._version import __version__
from ...engines import Engine, TaskFailed, report_progress
from ...writers._base import SharingWriter, Writer
from ._assembler import LAYOUT_REVISION, Assembler
from ._config import (
    DEFAULT_DATE_ADDED,
    FilePlan,
    GenerateConfig,
    GenerateResult,
    RowSpec,
)
from ._dataset_card import IN_PROGRESS, _card_name, card_header, dataset_card, generation
from ._fit import check_needles_fit
from ._models import Sample
from ._rows import MRCR_SCHEMA, rows_to_table


def sample_for(spec: RowSpec, assembler: Assembler) -> Sample:
    return assembler.sample(n_needles=spec.n_needles, seed=spec.row_seed, token_bin=spec.bin, tokens=spec.tokens)


#: Chunks of a file cut for balance (see `plan_chunks`) hold about a third of a worker's part of
#: the job, within these decoded bytes: enough to be worth a unit, and at most two dozen rows of
#: the 1M bin (a chunk is held whole by its worker, then joined, see `Join`).
UNITS_PER_WORKER = 3
MIN_UNIT_BYTES = 4 << 20
UNIT_BYTES = 128 << 20
#: Units submitted ahead per worker: enough that the workers never wait while the calling process
#: joins a file's chunks (with two per worker they did, a third of a second per file).
JOIN_SLACK = 6
#: Upper estimate of decoded bytes per token of a row (JSON-escaped English), to size units before
#: the rows exist.
BYTES_PER_TOKEN = 5


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


def generate_dataset(
    config: GenerateConfig,
    writer: Writer,
    *,
    command: str = "",
    engine: Engine | None = None,
    on_rows: Callable[[int], None] | None = None,
    on_reused: Callable[[int], None] | None = None,
    overwrite: bool = False,
) -> GenerateResult:
    """Generate this shard's files under `config.out`; each file appears atomically when complete.

    Work is split into units (a file, or a chunk of a large file's rows) run by `engine` (default:
    a local process pool over every core); rows are a pure function of their spec and the writer,
    so the files are byte-identical whatever the engine and worker count. A file already written
    by an identical earlier run (same rows, writer and version, as its sidecar records) is kept,
    as is each finished chunk of an interrupted large file: rerunning only writes what is missing.
    AssemblyError for needle counts a bin cannot hold (see `check_needles_fit`). A folder holds one
    generation: another one's card there is refused (`FolderTaken`), unless `overwrite`, which
    first removes the files that card lists.
    """
    from ...engines import LocalEngine

    check_needles_fit(config, writer)  # a request no row can meet is refused before any work
    claim_folder(config.out, generation(config, writer), overwrite)
    # The card names this generation and its files from the start: an interrupted run is known too.
    write_text_atomic(config.out / _card_name(config), card_header(config, writer) + IN_PROGRESS)

    run_key = secrets.token_hex(8)  # workers keep one assembler per run, never across runs
    pending: list[tuple[FilePlan, Path, str]] = []
    reused: dict[Path, list[dict]] = {}
    for file_plan in config.shard_plan():
        # Absolute: workers (other processes, other nodes of a cluster) may run in another folder.
        path = (config.out / file_plan.relative_path).absolute()
        build = _build_fingerprint(config, writer, file_plan)
        records = _reusable_sidecar(path, build, len(file_plan.rows))
        if records is not None:
            reused[path] = records
            if on_reused is not None:
                on_reused(len(records))
            continue
        pending.append((file_plan, path, build))

    own_engine = engine is None
    engine = engine if engine is not None else LocalEngine(preload=worker_preload(config.tokenizer))
    chunking = plan_chunks([file_plan.rows for file_plan, _, _ in pending], engine.workers)
    files = [(*file, chunks) for file, chunks in zip(pending, chunking, strict=True)]
    chunk_units = []
    for _, path, build, chunks in files:
        parts = _parts_dir(path, build, chunks) if len(chunks) > 1 else None
        for k, rows in enumerate(chunks):
            if parts is not None and _finished_part(parts, k) is not None:
                if on_rows is not None:
                    on_rows(len(rows))
                continue
            chunk_units.append((writer, run_key, config.date_added, rows, build, path, parts, k))
    runner = engine
    if isinstance(engine, LocalEngine) and len(chunk_units) + len([f for f in files if len(f[3]) > 1]) <= 1:
        runner = LocalEngine(1)  # one unit of work: a pool would only add its start-up
    failures: list[tuple[str, str]] = []
    joins = {
        path: Join(path, _parts_dir(path, build, chunks), len(chunks))
        for _, path, build, chunks in files
        if len(chunks) > 1
    }
    # A local engine's parts are on this machine: this process joins each file while its chunks are
    # still being generated, so no join waits at the end. Elsewhere joins are units of their own.
    join_here = isinstance(runner, LocalEngine)
    outcomes: Generator[object, None, None] | None = None
    try:
        store = _share_writings(writer, [u[3] for u in chunk_units], runner, config.out, config.tokenizer)
        chunk_work = [(*unit, store, config.tokenizer) for unit in chunk_units]
        units_left = Counter(unit[5] for unit in chunk_work)
        # Units return nothing, so many can wait ahead: workers keep busy while this process joins.
        rows_shown = Counter[int]()  # rows of each unit that its worker reported done

        def show_rows(index: int, rows: int) -> None:
            rows_shown[index] += rows
            if on_rows is not None:
                on_rows(rows)

        outcomes = runner.map(write_chunk, chunk_work, window=JOIN_SLACK * runner.workers, on_progress=show_rows)
        for index, (unit, outcome) in enumerate(zip(chunk_work, outcomes, strict=True)):
            path = unit[5]
            units_left[path] -= 1
            if isinstance(outcome, TaskFailed):
                failures.append((str(path), outcome.message))
                if path in joins:  # the file cannot be completed: stop joining it
                    joins.pop(path).abort()
                continue
            if on_rows is not None and len(unit[3]) > rows_shown[index]:
                on_rows(len(unit[3]) - rows_shown[index])
            if join_here and path in joins:
                if units_left[path]:
                    joins[path].advance()
                else:
                    joins[path].finish()
                    del joins[path]
        pending_joins = list(joins.values())
        if join_here:
            for join in pending_joins:  # files whose every chunk was finished by an earlier run
                join.finish()
        else:
            join_units = [(join.path, join.parts, join.count) for join in pending_joins]
            for (path, parts, _), outcome in zip(join_units, runner.map(join_parts, join_units), strict=True):
                if isinstance(outcome, TaskFailed):
                    failures.append((str(path), outcome.message))
                else:  # the file is in place now
                    shutil.rmtree(parts, ignore_errors=True)
    finally:
        if outcomes is not None:
            outcomes.close()  # when interrupted: the engine stops the units still running
        for join in joins.values():
            join.abort()
        _ASSEMBLERS.clear()
        if own_engine:
            engine.close()
        for _, path, _, _ in files:  # no unit runs now: what a writer that died or was stopped left
            remove_partials(path)
            remove_partials(sidecar_path(path))
    if failures:
        raise FileFailed(failures)
    if store is not None:
        shutil.rmtree(store, ignore_errors=True)

    written, metadata = [], []
    for file_plan in config.shard_plan():
        path = config.out / file_plan.relative_path
        records = reused.get(path.absolute())
        if records is None:
            records = [json.loads(line) for line in sidecar_path(path).read_text(encoding="utf-8").splitlines()]
        written.append(path)
        metadata += [
            {k: v for k, v in r.items() if k not in ("build", "tokenizer")} | {"n_needles": file_plan.n_needles}
            for r in records
        ]
    result = GenerateResult(files=tuple(written), samples=tuple(metadata))
    write_text_atomic(config.out / _card_name(config), dataset_card(config, writer, result, command))
    return result


RowChunk = tuple[RowSpec, ...]


def worker_preload(tokenizer: str = DEFAULT_TOKENIZER) -> tuple[str, ...]:
    """Modules a local pool's fork server imports first: workers start with the offline writer's
    word pools built, and o200k when it is the tokenizer (no need to build it for another)."""
    modules = ("mrcr_gen.recipes.openai_mrcr._generate", "mrcr_gen.recipes.openai_mrcr._preload")
    return (*modules, "mrcr_gen._preload_o200k") if tokenizer == DEFAULT_TOKENIZER else modules


def _row_tokens(spec: RowSpec) -> int:
    """The most tokens the row can have."""
    return spec.bin.upper if spec.bin is not None else spec.tokens or 0


def _row_bytes(spec: RowSpec) -> int:
    return _row_tokens(spec) * BYTES_PER_TOKEN


def plan_chunks(files: Sequence[Sequence[RowSpec]], workers: int) -> list[list[RowChunk]]:
    """Each file's rows cut into work units, for workers that take the units in order: the whole
    file, unless it would end after the moment every worker ends when the work is spread evenly
    (a file larger than a worker's part of the job, or one of the last files). Such a file is cut
    into chunks, of at most UNIT_BYTES and a fraction of a worker's part, that the free workers
    share. A whole file costs least: its worker compresses it, where a chunked file is written
    uncompressed, read back and compressed by its join. How rows are cut never changes the bytes."""
    sizes = [sum(map(_row_bytes, rows)) for rows in files]
    planned = sum(sizes)
    chunk = min(UNIT_BYTES, max(MIN_UNIT_BYTES, planned // (workers * UNITS_PER_WORKER)))
    free_at = [0] * workers  # when each worker is done with the units planned so far (a heap)
    plan = []
    for rows, size in zip(files, sizes, strict=True):
        units = [tuple(rows)] if (free_at[0] + size) * workers <= planned else split_rows(rows, chunk)
        for unit in units:
            heapq.heapreplace(free_at, free_at[0] + sum(map(_row_bytes, unit)))
        plan.append(units)
    return plan


def split_rows(rows: Sequence[RowSpec], target: int = UNIT_BYTES) -> list[RowChunk]:
    """Consecutive rows in chunks of about `target` decoded bytes (estimated from their token targets)."""
    chunks: list[RowChunk] = []
    current: list[RowSpec] = []
    size = 0
    for spec in rows:
        estimate = _row_bytes(spec)
        if current and size + estimate > target:
            chunks.append(tuple(current))
            current, size = [], 0
        current.append(spec)
        size += estimate
    if current:
        chunks.append(tuple(current))
    return chunks


#: Tokens of a row's bin (its upper edge) per distractor pair it draws, about (offline writer:
#: 2,100 pairs in a row of the 1M bin), to foresee how many pairs a job draws.
PAIR_TOKENS = 500
#: Share when the workers, each composing what it draws, would compose this many times the
#: writings that composing them once costs.
SHARE_WHEN = 1.2
#: Shared writings composed per work unit.
SHARED_PART_KEYS = 2048


def _share_writings(
    writer: Writer, chunks: Sequence[RowChunk], engine: Engine, out: Path, tokenizer: str = DEFAULT_TOKENIZER
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
    key = json.dumps([__version__, writer.describe(), tokenizer], sort_keys=True, default=str)
    key = hashlib.sha256(key.encode()).hexdigest()[:16]
    store = out.absolute() / f".writings-{key}"
    units = [
        (writer, start, min(start + SHARED_PART_KEYS, n_keys), store)
        for start in range(0, n_keys, SHARED_PART_KEYS)
        if not (store / f"{start}.arrow").is_file()
    ]
    for _ in engine.map(compose_shared, units):
        pass  # a part that failed is composed by the workers that need it, as without sharing
    return store


def compose_shared(writer: SharingWriter, start: int, stop: int, store: Path) -> None:
    """Work unit: compose and count shared writings `start:stop` into a part under `store`."""
    writer.compose_part(start, stop, store)


_ASSEMBLERS: dict[str, Assembler] = {}


def _assembler(writer: Writer, run_key: str, date_added: str, tokenizer: str) -> Assembler:
    """One assembler per run and process, so each worker tokenizes a writing at most once."""
    key = f"{run_key}/{date_added}/{tokenizer}"
    if key not in _ASSEMBLERS:
        _ASSEMBLERS.clear()
        _ASSEMBLERS[key] = Assembler(writer, date_added=date_added, tokenizer=tokenizer)
    return _ASSEMBLERS[key]


def write_chunk(
    writer: Writer,
    run_key: str,
    date_added: str,
    rows: RowChunk,
    build: str,
    path: Path,
    parts: Path | None,
    index: int,
    store: Path | None = None,
    tokenizer: str = DEFAULT_TOKENIZER,
) -> None:
    """Work unit: generate `rows`; write them as the whole file `path` with its sidecar, or, when
    the file has several chunks, as part `index` under `parts` (see `join_parts`). Writings
    composed ahead (`store`, see `_share_writings`) are read rather than composed again."""
    assembler = _assembler(writer, run_key, date_added, tokenizer)
    if store is not None and isinstance(assembler.writer, SharingWriter):
        assembler.writer.attach(store)
    counted_by = load_tokenizer(tokenizer).describe()["spec"]
    records: list[str] = []

    def tables() -> Iterator[pa.Table]:
        # A row group's worth at a time: a whole file of the 1M bin is gigabytes.
        for batch in split_rows(rows, ROW_GROUP_BYTES):
            samples = [sample_for(spec, assembler) for spec in batch]
            report_progress(len(samples))
            records.extend(
                json.dumps({"build": build, **s.metadata(), "tokenizer": counted_by}) + "\n" for s in samples
            )
            yield rows_to_table(s.row for s in samples)

    if parts is None:
        _write_file(path, tables(), records)
        return
    write_arrow_atomic(pa.concat_tables(tables()), parts / f"{index}.arrow")
    write_text_atomic(parts / f"{index}.jsonl", "".join(records))  # last: it marks the part finished


def join_parts(path: Path, parts: Path, count: int) -> None:
    """Work unit: the file `path` from its finished parts, in order. The parts stay: the engine's
    caller moves the file into place when it takes the result, and removes them after."""
    Join(path, parts, count).write()


class Join:
    """A large file written from its finished parts, in order, as they finish (see `advance`)."""

    def __init__(self, path: Path, parts: Path, count: int) -> None:
        self.path, self.parts, self.count = path, parts, count
        self._added = 0
        self._records: list[str] = []
        self._writer: RowGroupWriter | None = None

    def advance(self) -> None:
        """Add the parts finished so far that follow the last one added."""
        while self._added < self.count and (records := _finished_part(self.parts, self._added)) is not None:
            if self._writer is None:
                # The sidecar vouches for the parquet beside it: drop the old one before the parquet
                # is replaced, or a crash in between would leave it vouching for different rows.
                sidecar_path(self.path).unlink(missing_ok=True)
                self._writer = RowGroupWriter(self.path, MRCR_SCHEMA)
            self._writer.add(read_arrow(self.parts / f"{self._added}.arrow"))
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
        assert self._writer is not None
        writer, self._writer = self._writer, None
        writer.close()
        write_text_atomic(sidecar_path(self.path), "".join(self._records))

    def abort(self) -> None:
        """Drop the file being written, if any (its parts stay for a rerun)."""
        if self._writer is not None:
            writer, self._writer = self._writer, None
            writer.abort()


def _write_file(path: Path, tables: Iterable[pa.Table], records: list[str]) -> None:
    """The file from `tables`, then its sidecar from `records` (filled as the tables are made)."""
    sidecar_path(path).unlink(missing_ok=True)  # see Join.advance
    write_row_groups(tables, path, MRCR_SCHEMA)
    write_text_atomic(sidecar_path(path), "".join(records))


def _parts_dir(path: Path, build: str, chunks: Sequence[RowChunk]) -> Path:
    """Where a large file's chunks wait to be joined: named by its build and its chunking, so a
    rerun with another chunking (another worker count) never mixes parts."""
    cut = hashlib.sha256(json.dumps([len(c) for c in chunks]).encode()).hexdigest()[:8]
    return path.with_name(f".{path.name.removesuffix('.parquet')}.{build}.{cut}.parts")


def _finished_part(parts: Path, index: int) -> str | None:
    try:
        if (parts / f"{index}.arrow").is_file():
            return (parts / f"{index}.jsonl").read_text(encoding="utf-8")
    except OSError:
        pass
    return None


def _build_fingerprint(config: GenerateConfig, writer: Writer, file_plan: FilePlan) -> str:
    """What determines a file's bytes: version, assembly, writer, date and every row's spec."""
    rows = [(spec.row_seed, spec.n_needles, str(spec.bin), spec.tokens) for spec in file_plan.rows]
    parts = [__version__, LAYOUT_REVISION, writer.describe(), config.date_added, rows]
    if config.tokenizer != DEFAULT_TOKENIZER:  # o200k fingerprints stay as before, so old files are reused
        parts.append(load_tokenizer(config.tokenizer).describe())
    key = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def _reusable_sidecar(path: Path, build: str, n_rows: int) -> list[dict] | None:
    """The sidecar records of a complete file from an identical run, else None."""
    sidecar = sidecar_path(path)
    if not (path.is_file() and sidecar.is_file()):
        return None
    try:
        records = [json.loads(line) for line in sidecar.read_text(encoding="utf-8").splitlines()]
        if len(records) != n_rows or any(not isinstance(r, dict) or r.get("build") != build for r in records):
            return None
        if pq.ParquetFile(path).metadata.num_rows != n_rows:
            return None
    except (OSError, ValueError, pa.ArrowException):
        return None
    return records


def generate_sample(
    n_needles: int = 4,
    bin_upper: int | None = 8192,
    *,
    tokens: int | None = None,
    seed: int = 0,
    writer: Writer | None = None,
    date_added: str = DEFAULT_DATE_ADDED,
) -> Sample:
    """One sample, e.g. for tests and notebooks: row `seed` of a dataset with that bin or token target."""
    from ..._bins import bin_by_upper
    from ._offline import OfflineWriter

    if tokens is None and bin_upper is None:
        raise ValueError("give bin_upper or tokens")
    spec = RowSpec(
        n_needles=n_needles,
        bin=bin_by_upper(bin_upper) if bin_upper is not None and tokens is None else None,
        tokens=tokens,
        index=seed,
        seed=seed,
    )
    return sample_for(spec, Assembler(writer or OfflineWriter(seed), date_added=date_added))
