"""openai/mrcr generation: its files planned for the core pipeline (`mrcr_gen.generate`), and the
builder that makes their rows in the workers, one row per spec, as parquet in the openai/mrcr schema."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..._ownership import recipe_metadata
from ..._parquet import RowGroupFileJoin, RowGroupWriter
from ..._tokens import DEFAULT_TOKENIZER, load_tokenizer
from ...engines import Engine
from ...generate import FileFailed, GenerationJob, PlannedFile, RowBatch, row_groups, run_job, shard_card_name
from ...writers._base import SharingWriter, Writer
from ._assembler import LAYOUT_REVISION, Assembler
from ._config import DEFAULT_DATE_ADDED, FilePlan, GenerateConfig, GenerateResult, RowSpec
from ._dataset_card import card_body, card_frame, generation
from ._fit import check_needles_fit
from ._models import MrcrRow, Sample
from ._rows import MRCR_SCHEMA, rows_to_table
from ._workers import worker_preload

NAME, VERSION = "openai-mrcr", "1"
#: The schema of generated files: the openai/mrcr columns, and the recipe in the key-value metadata.
GENERATED_SCHEMA = MRCR_SCHEMA.with_metadata(recipe_metadata(NAME, VERSION))


def sample_for(spec: RowSpec, assembler: Assembler) -> Sample:
    return assembler.sample(n_needles=spec.n_needles, seed=spec.row_seed, token_bin=spec.bin, tokens=spec.tokens)


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
    """Generate this shard's files under `config.out` through the core pipeline (`run_job`: each
    file appears atomically when complete, byte-identical whatever the engine and worker count; a
    rerun writes only what is missing; a folder holds one generation unless `overwrite`).
    AssemblyError for needle counts a bin cannot hold (see `check_needles_fit`)."""
    check_needles_fit(config, writer)  # a request no row can meet is refused before any work
    job = openai_job(config, writer)
    result = run_job(job, command=command, engine=engine, on_rows=on_rows, on_reused=on_reused, overwrite=overwrite)
    return _result(result)


def openai_job(config: GenerateConfig, writer: Writer) -> GenerationJob:
    """The core's job for `config`: this shard's files, their builder, the folder's record and card."""
    return GenerationJob(
        out=config.out,
        files=tuple(planned_file(plan) for plan in config.shard_plan()),
        builder=OpenaiBuilder(writer, secrets.token_hex(8), config.date_added, config.tokenizer),
        generation=generation(config, writer),
        tokenizer=config.tokenizer,
        frame=card_frame(config),
        card_name=shard_card_name(config.shard),
        card_body=lambda result, command: card_body(config, writer, _result(result), command),
        preload=worker_preload(config.tokenizer),
    )


def planned_file(plan: FilePlan) -> PlannedFile:
    return PlannedFile(relative_path=plan.relative_path, rows=plan.rows, info=plan.n_needles)


def _result(result) -> GenerateResult:
    """The core's result as openai/mrcr's: the files, and every row's sample metadata."""
    samples = [record | {"n_needles": file.planned.info} for file in result.files for record in file.records]
    return GenerateResult(files=tuple(file.path for file in result.files), samples=tuple(samples))


_ASSEMBLERS: dict[str, Assembler] = {}


@dataclass(frozen=True)
class OpenaiBuilder:
    """Makes openai/mrcr rows in the workers: one row per spec, a pure function of it and the writer.
    `run_key` keeps one assembler per run and process (each worker tokenizes a writing at most once)."""

    writer: Writer
    run_key: str
    date_added: str
    tokenizer: str

    def build_key(self, file: PlannedFile) -> list:
        """Assembly, writer, date and every row's spec (the core adds the version)."""
        rows = [(spec.row_seed, spec.n_needles, str(spec.bin), spec.tokens) for spec in file.rows]
        parts = [LAYOUT_REVISION, self.writer.describe(), self.date_added, rows]
        if self.tokenizer != DEFAULT_TOKENIZER:  # o200k fingerprints stay as before, so old files are reused
            parts.append(load_tokenizer(self.tokenizer).describe())
        return parts

    def batches(self, file: PlannedFile, rows: tuple, store: Path | None) -> Iterator[RowBatch]:
        assembler = self._assembler()
        if store is not None and isinstance(assembler.writer, SharingWriter):
            assembler.writer.attach(store)
        # A row group at a time: a whole file of the 1M bin is gigabytes.
        for batch in row_groups(rows):
            records: list[dict] = []
            yield RowBatch(rows_to_table(_rows(batch, assembler, records)), records)

    def open_file(self, path: Path, groups: Sequence[int], durable: bool = True) -> RowGroupWriter:
        # A whole file's sidecar is sealed to its sha256; a part (not durable) is hashed by its join.
        return RowGroupWriter(path, GENERATED_SCHEMA, digest=durable, groups=groups, durable=durable)

    def join_file(self, path: Path) -> RowGroupFileJoin:
        return RowGroupFileJoin(path)

    def sharing_writer(self) -> SharingWriter | None:
        return self.writer if isinstance(self.writer, SharingWriter) else None

    def release(self) -> None:
        _ASSEMBLERS.clear()

    def _assembler(self) -> Assembler:
        key = f"{self.run_key}/{self.date_added}/{self.tokenizer}"
        if key not in _ASSEMBLERS:
            _ASSEMBLERS.clear()
            _ASSEMBLERS[key] = Assembler(self.writer, date_added=self.date_added, tokenizer=self.tokenizer)
        return _ASSEMBLERS[key]


def _rows(specs: tuple, assembler: Assembler, records: list[dict]) -> Iterator[MrcrRow]:
    """Each spec's row, its sample's metadata added to `records`: the sample is dropped as soon as
    its row is taken (`rows_to_table` encodes it at once), not held with the rest of the batch."""
    for spec in specs:
        sample = sample_for(spec, assembler)
        records.append(sample.metadata())
        yield sample.row


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


__all__ = ["FileFailed", "GenerateConfig", "GenerateResult", "RowSpec", "generate_dataset", "generate_sample"]
