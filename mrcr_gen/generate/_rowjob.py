"""Generation for a recipe whose rows are built one at a time from drawn specs: the files (`samples`
rows per needle count and bin, file i of the plan in shard i mod N), the builder that writes them
as parquet in the recipe's schema with its recipe record, and the job around them (`row_job`).
A recipe then supplies its schema, its writer and `build(spec, writer) -> (columns, sidecar record)`."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._bins import Bin
from .._card import shard_card_name
from .._ownership import METADATA_KEY, recipe_metadata
from .._seeding import derive_seed
from ..writers._base import SharingWriter
from ._job import CardFrame, GenerationJob, PlannedFile, RowBatch
from ._request import GenerateRequest, checked_tokenizer, parse_bins, parse_shard

if TYPE_CHECKING:  # pyarrow loads when rows are built, not when a recipe declares its job
    import pyarrow as pa

    from .._parquet import RowGroupFileJoin, RowGroupWriter

#: (spec, writer) -> the row's columns and its sidecar record (`bin`, `n_tokens`, `n_needles`, ...).
BuildRow = Callable[["RowSpec", Any], tuple[dict[str, Any], dict[str, Any]]]


@dataclass(frozen=True)
class RowSpec:
    """One row to build: its seed, needle count and the bin its token count falls in."""

    seed: int
    n_needles: int
    bin: Bin

    @property
    def max_tokens(self) -> int:
        return self.bin.upper


@dataclass(frozen=True)
class RowBuilder:
    """The `FileBuilder` of rows built one at a time (pickled to the workers): `build` must be a
    module-level function and each row a pure function of its spec and the writer."""

    build: BuildRow
    writer: Any  # what `build` draws its writings from; its `describe()` is recorded
    schema: pa.Schema  # with the recipe record in its metadata
    tokenizer: str

    def build_key(self, file: PlannedFile) -> list[Any]:
        rows = [(spec.seed, spec.n_needles, spec.bin.label) for spec in file.rows]
        recipe = (self.schema.metadata or {}).get(METADATA_KEY, b"").decode()  # the recipe and its version
        return [recipe, self.writer.describe(), rows]

    def batches(self, file: PlannedFile, rows: tuple[Any, ...], store: Path | None) -> Iterator[RowBatch]:
        import pyarrow as pa

        built = [self.build(spec, self.writer) for spec in rows]
        yield RowBatch(pa.Table.from_pylist([row for row, _ in built], schema=self.schema), [r for _, r in built])

    def open_file(self, path: Path, groups: Sequence[int], durable: bool = True) -> RowGroupWriter:
        from .._parquet import RowGroupWriter

        # A whole file's sidecar is sealed to its sha256; a part (not durable) is hashed by its join.
        return RowGroupWriter(path, self.schema, digest=durable, groups=groups, durable=durable)

    def join_file(self, path: Path) -> RowGroupFileJoin:
        from .._parquet import RowGroupFileJoin

        return RowGroupFileJoin(path)

    def sharing_writer(self) -> SharingWriter | None:
        return None  # each worker composes the writings it needs

    def release(self) -> None:
        pass


def row_job(
    request: GenerateRequest,
    *,
    recipe: str,
    version: str,
    schema: pa.Schema,
    build: BuildRow,
    writer: Callable[[str], Any],
    needles: tuple[int, ...] = (2, 4, 8),
) -> GenerationJob:
    """The job of `request`: `request.samples` rows per needle count (default `needles`) and bin,
    each file `{n}needle/{n}needle_{upper}.parquet`, seeded from `request.seed`; `writer(tokenizer)`."""
    needles, bins = request.needles or needles, parse_bins(request.bins)
    shard, tokenizer = parse_shard(request.shard), checked_tokenizer(request.tokenizer)
    files = []
    for n in needles:
        for b in bins:
            rows = tuple(RowSpec(derive_seed(request.seed, n, b.upper, i), n, b) for i in range(request.samples))
            files.append(PlannedFile(f"{n}needle/{n}needle_{b.upper}.parquet", rows))
    chosen = writer(tokenizer)
    generation = {"recipe": recipe, "needles": sorted(needles), "bin": [b.label for b in bins], "seed": request.seed}
    return GenerationJob(
        out=request.out or Path(f"{recipe}-data"),
        files=tuple(f for i, f in enumerate(files) if i % shard[1] == shard[0] - 1),
        builder=RowBuilder(build, chosen, schema.with_metadata(recipe_metadata(recipe, version)), tokenizer),
        generation=generation | {"samples": request.samples, "writer": chosen.describe(), "tokenizer": tokenizer},
        tokenizer=tokenizer,
        frame=CardFrame(hub=("license: mit",), configs=tuple((f"{n}needle", f"{n}needle/*.parquet") for n in needles)),
        card_name=shard_card_name(shard),
    )
