"""mrcr-json's generation part: its files planned for the core pipeline and the builder that makes their rows."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from mrcr_gen._errors import RequestError
from mrcr_gen._ownership import recipe_metadata
from mrcr_gen._parquet import RowGroupWriter
from mrcr_gen._seeding import derive_seed
from mrcr_gen.generate import (
    CardFrame,
    GenerateRequest,
    GenerationJob,
    PlannedFile,
    RowBatch,
    checked_tokenizer,
    parse_bins,
    parse_shard,
)

from ._answers import NAME
from ._rows import SCHEMA, JsonWriter, RowSpec, build_row

VERSION = "1"


@dataclass(frozen=True)
class Builder:
    """Makes rows in the workers, each a pure function of its spec and the writer."""

    writer: JsonWriter
    tokenizer: str

    def build_key(self, file: PlannedFile) -> list:
        return [VERSION, self.writer.describe(), [(s.seed, s.n_needles, s.bin.label) for s in file.rows]]

    def batches(self, file: PlannedFile, rows: tuple, store: Path | None) -> Iterator[RowBatch]:
        built = [build_row(spec, self.writer) for spec in rows]
        yield RowBatch(pa.Table.from_pylist([row for row, _ in built], schema=SCHEMA), [r for _, r in built])

    def open_file(self, path: Path) -> RowGroupWriter:
        return RowGroupWriter(path, SCHEMA.with_metadata(recipe_metadata(NAME, VERSION)))

    def sharing_writer(self) -> None:
        return None  # short rows: every worker composes what it needs

    def release(self) -> None:
        pass


def plan(request: GenerateRequest) -> GenerationJob:
    """The files `request` asks for: `samples` rows per needle count and bin, file i in shard i mod N."""
    if request.tokens is not None or request.writer != "offline":
        raise RequestError(f"--recipe {NAME} takes neither --tokens nor a --writer other than offline")
    needles, bins = request.needles or (2, 4, 8), parse_bins(request.bins)
    (index, count), tokenizer = parse_shard(request.shard), checked_tokenizer(request.tokenizer)
    every = [
        PlannedFile(
            f"{n}needle/{n}needle_{b.upper}.parquet",
            tuple(RowSpec(derive_seed(request.seed, n, b.upper, i), n, b) for i in range(request.samples)),
        )
        for n in needles
        for b in bins
    ]
    writer = JsonWriter(tokenizer)
    generation = {"recipe": NAME, "needles": sorted(needles), "bin": [b.label for b in bins], "seed": request.seed}
    return GenerationJob(
        out=request.out or Path("mrcr-json-data"),
        files=tuple(f for i, f in enumerate(every) if i % count == index - 1),
        builder=Builder(writer, tokenizer),
        generation=generation | {"samples": request.samples, "writer": writer.describe(), "tokenizer": tokenizer},
        tokenizer=tokenizer,
        frame=CardFrame(hub=("license: mit",), configs=tuple((f"{n}needle", f"{n}needle/*.parquet") for n in needles)),
        card_name="README.md" if count == 1 else f"README.shard-{index}-of-{count}.md",
    )
