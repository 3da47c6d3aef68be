"""MRCR v2 dataset generation: buckets -> transcripts -> rows -> CSV or parquet files + a card.

How rows are drawn: a bucket's rows come from a sequence of transcripts. Transcript t of a
bucket aims at a length from a golden-ratio sequence over the bucket (a seeded start, then
steps of 0.618... of the width), so however many transcripts a bucket needs their lengths
spread evenly over it. Each transcript gives at most `rows_per_transcript` rows, drawn
uniformly without replacement from its (key, ordinal) pairs whose length lies in the bucket;
the last transcript gives only what is still missing, so a bucket has exactly `samples` rows.
Rows of one transcript are written one after another (prefix caches hit when sent in order).
"""

from __future__ import annotations

import json
import math
import secrets
import statistics
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NoReturn

from pydantic import Field, model_validator

from ..._bins import Bin
from ..._budget import AssemblyError
from ..._models import _Frozen
from ..._ownership import recipe_metadata
from ..._seeding import derive_seed, derived_rng
from ..._tokens import load_tokenizer, tokenizer_threads
from ..._version import __version__
from ...engines import Engine
from ...generate import (
    CardFrame,
    GenerationJob,
    GenerationResult,
    PlannedFile,
    RowBatch,
    WrittenFile,
    run_job,
    shard_card_name,
)
from ._assembler import LAYOUT_REVISION, Transcript, V2Assembler, counts_add_up
from ._catalog import V2Key, load_v2_catalog
from ._counted import RowCounted
from ._rows import V2FileWriter, V2Row
from ._workers import worker_preload

#: (4096, 8192] ... (4194304, 8388608]: upstream's buckets, lower edge excluded.
V2_BUCKETS: tuple[Bin, ...] = tuple(Bin(lower=2**k, upper=2 ** (k + 1)) for k in range(12, 23))
V2_BUCKET_EDGES: tuple[int, ...] = tuple(b.upper for b in V2_BUCKETS)
#: Without --bin: the buckets Google reports ("up to 128K" and "at 1M").
DEFAULT_V2_BUCKETS: tuple[Bin, ...] = tuple(b for b in V2_BUCKETS if b.upper <= 1048576)
GOLDEN = (math.sqrt(5) - 1) / 2


def v2_bucket(upper: int) -> Bin:
    for bucket in V2_BUCKETS:
        if bucket.upper == upper:
            return bucket
    raise ValueError(f"no MRCR v2 bucket has upper edge {upper}; choose one of {', '.join(map(str, V2_BUCKET_EDGES))}")


def v2_bucket_for(n_tokens: int) -> Bin | None:
    return next((b for b in V2_BUCKETS if n_tokens in b), None)


def tokens_range(tokens: int) -> Bin:
    """--tokens N: every row within 1% (at least 64 tokens) below N, never above."""
    return Bin(lower=tokens - max(64, tokens // 100) - 1, upper=tokens)


class V2Config(_Frozen):
    needles: tuple[int, ...] = (8,)
    buckets: tuple[Bin, ...] = DEFAULT_V2_BUCKETS
    tokens: int | None = Field(
        default=None, ge=4161, le=8388608, description="every row within 1% below it, inside (4096, 8388608]"
    )
    samples: int = Field(default=100, ge=1)
    rows_per_transcript: int = Field(default=8, ge=1)
    seed: int = 0
    out: Path = Path("mrcr-v2-data")
    format: Literal["csv", "parquet"] = "csv"
    shard: tuple[int, int] = (1, 1)
    tokenizer_spec: str = "o200k_base"

    @model_validator(mode="after")
    def _check(self) -> V2Config:
        if not self.needles or not all(1 <= n <= 8 for n in self.needles):
            raise ValueError("MRCR v2 needle counts are 1 to 8 (the ordinals first ... eighth)")
        index, count = self.shard
        if not 1 <= index <= count:
            raise ValueError(f"shard {index}/{count}: K must be between 1 and N")
        return self

    def targets(self) -> list[tuple[str, Bin]]:
        """(label, range) of every bucket, or of the --tokens range."""
        if self.tokens is not None:
            return [(f"tokens={self.tokens}", tokens_range(self.tokens))]
        return [(b.label, b) for b in dict.fromkeys(self.buckets)]

    def files(self) -> list[tuple[int, str, Bin, Path]]:
        """(needles, label, range, relative path) of every file of the dataset, in order."""
        found = []
        for n in dict.fromkeys(self.needles):
            for label, where in self.targets():
                name = f"tokens_{self.tokens}" if self.tokens is not None else f"in_({where.lower},{where.upper})"
                found.append((n, label, where, Path(f"{n}needle") / f"mrcr_v2_{n}needle_{name}.{self.format}"))
        return found

    def shard_files(self) -> list[tuple[int, str, Bin, Path]]:
        index, count = self.shard
        return [f for i, f in enumerate(self.files()) if i % count == index - 1]


@dataclass
class _Draft:
    """A transcript built before its rows are needed, its whole-row check (`counts_add_up`) running
    on a tokenizer thread meanwhile; or why it could not be built (raised when it is needed)."""

    transcript: Transcript | None = None
    adds_up: Future[bool] | None = None
    error: AssemblyError | None = None

    def observe(self) -> None:
        """Wait for a check nobody will read (a draft left over), so its outcome is never lost."""
        if self.adds_up is not None and not self.adds_up.cancel():
            self.adds_up.exception()


def bucket_rows(assembler: V2Assembler, config: V2Config, n_needles: int, where: Bin) -> Iterator[tuple[int, V2Row]]:
    """(transcript index, row) for exactly `config.samples` rows of one bucket, in write order."""
    for index, _, row in transcript_rows(assembler, config, n_needles, where):
        yield index, row


def transcript_rows(
    assembler: V2Assembler, config: V2Config, n_needles: int, where: Bin
) -> Iterator[tuple[int, Transcript, V2Row]]:
    """(transcript index, transcript, row) for exactly `config.samples` rows of one bucket, in write order.

    Transcript t+1 is built while transcript t's whole row is counted (one core each; no count for
    o200k: `splits_at_turns`): what a transcript is depends on its index alone, so building it early
    changes nothing."""
    where_key = where.upper if config.tokens is None else f"tokens={config.tokens}"
    start = derived_rng("mrcr-v2 bucket", config.seed, n_needles, where_key).random()
    width = where.upper - where.smallest

    def aim(index: int) -> tuple[int, int]:
        """(target length, seed) of transcript `index`."""
        fraction = (start + index * GOLDEN) % 1.0
        target = where.smallest + int(fraction * (width + 1)) if config.tokens is None else where.upper
        return min(target, where.upper), derive_seed(config.seed, n_needles, where_key, index)

    def draft(index: int) -> _Draft:
        target, seed = aim(index)
        try:
            transcript = assembler.build(n_needles=n_needles, target=target, lowest=where.smallest, seed=seed)
        except AssemblyError as exc:
            return _Draft(error=exc)
        return _Draft(transcript, tokenizer_threads().submit(counts_add_up, transcript))

    written = transcript_index = 0
    current: _Draft | None = None
    ahead: _Draft | None = None
    try:
        while written < config.samples:
            target, seed = aim(transcript_index)
            wanted = min(config.rows_per_transcript, config.samples - written)
            current = current or draft(transcript_index)
            ahead = None
            if current.transcript is not None:
                inside = sum(current.transcript.parts_len(*p) in where for p in current.transcript.pairs())
                if written + min(wanted, inside) < config.samples:  # as added: what the check most often confirms
                    ahead = draft(transcript_index + 1)
            transcript, pairs = _transcript_rows(assembler, n_needles, where, target, seed, wanted, current)
            for key, ordinal in pairs:
                yield transcript_index, transcript, transcript.row(key, ordinal)
            written += len(pairs)
            transcript_index += 1
            current = ahead
    finally:
        if ahead is not None:
            ahead.observe()


#: Rebuilds of a measured transcript none of whose rows fell inside the range, each aimed by the
#: difference between its whole and added counts, before giving up.
MAX_REAIMS = 4


def _transcript_rows(
    assembler: V2Assembler,
    n_needles: int,
    where: Bin,
    target: int,
    seed: int,
    wanted: int,
    first: _Draft | None = None,
) -> tuple[Transcript, list[tuple[V2Key, int]]]:
    """A transcript aimed at `target` and up to `wanted` of its (key, ordinal) pairs whose exact
    length lies in `where`, drawn uniformly without replacement; `first` is its first build, if
    drafted already."""
    shift = 0
    for attempt in range(MAX_REAIMS + 1):
        if attempt == 0 and first is not None:
            if first.error is not None:
                raise first.error
            assert first.transcript is not None and first.adds_up is not None
            transcript, adds_up = first.transcript, first.adds_up.result()
        else:
            transcript = assembler.build(
                n_needles=n_needles, target=target - shift, lowest=where.smallest - shift, seed=seed
            )
            adds_up = counts_add_up(transcript)
        rng = derived_rng("mrcr-v2 rows", seed)
        if adds_up:
            pairs = [p for p in transcript.pairs() if transcript.context_len(*p) in where]
            return transcript, rng.sample(pairs, min(wanted, len(pairs)))
        # The tokenizer does not split at turns: lengths are measured whole, pair by pair, in a
        # random order until enough lie in the range (the same draw as above, measured lazily).
        transcript.measured = True
        order = rng.sample(transcript.pairs(), len(transcript.pairs()))
        inside = [p for p in order if transcript.context_len(*p) in where][:wanted]
        if inside:
            return transcript, inside
        probe = order[0]
        shift = transcript.context_len(*probe) - transcript.parts_len(*probe)
    raise AssemblyError(
        f"cannot fit a transcript into {where.smallest}..{where.upper} tokens: counted whole, its rows keep "
        f"falling outside (the tokenizer merges across turn boundaries by about {shift} tokens)"
    )


def generate_v2(
    config: V2Config,
    writer,
    *,
    command: str = "",
    engine: Engine | None = None,
    on_rows: Callable[[int], None] | None = None,
    on_reused: Callable[[int], None] | None = None,
    overwrite: bool = False,
) -> list[dict]:
    """Write this shard's files through the core pipeline (`run_job`: a bucket's file is one work
    unit on `engine`, default a local process pool; each file appears atomically when complete,
    with its sidecar; a rerun keeps what an identical run completed; a folder holds one generation
    unless `overwrite`) and the dataset card; returns one summary record per file."""
    result = run_job(
        v2_job(config, writer),
        command=command,
        engine=engine,
        on_rows=on_rows,
        on_reused=on_reused,
        overwrite=overwrite,
    )
    return [file_summary(file) for file in result.files]


def v2_job(config: V2Config, writer) -> GenerationJob:
    """The core's job for `config`: this shard's files (one whole bucket each), their builder, the
    folder's record and card."""
    writer_tokenizer = getattr(writer, "tokenizer", config.tokenizer_spec)
    if writer_tokenizer != config.tokenizer_spec:
        raise ValueError(f"the writer counts with {writer_tokenizer}, the config with {config.tokenizer_spec}")
    index, count = config.shard
    files = tuple(
        PlannedFile(
            relative_path=relative.as_posix(),
            rows=tuple(BucketRow(where.upper, i) for i in range(config.samples)),
            whole=True,  # a bucket's rows come from a sequence of transcripts
            info=BucketFile(n_needles, label, where),
        )
        for n_needles, label, where, relative in config.shard_files()
    )
    return GenerationJob(
        out=config.out,
        files=files,
        builder=V2Builder(writer, config, secrets.token_hex(8)),
        generation=v2_generation(config, writer),
        tokenizer=config.tokenizer_spec,
        frame=v2_card_frame(config),
        card_name=shard_card_name((index, count)),
        card_body=lambda result, command: v2_card_body(config, writer, result, command),
        preload=worker_preload(config.tokenizer_spec, config.format),
    )


@dataclass(frozen=True)
class BucketRow:
    """A row of a bucket's file, as the core sizes it: the bucket's upper edge bounds its tokens."""

    upper: int
    index: int

    @property
    def max_tokens(self) -> int:
        return self.upper


@dataclass(frozen=True)
class BucketFile:
    """What a bucket's file is: its needle count, label (or tokens=N) and token range."""

    n_needles: int
    label: str
    where: Bin


_ASSEMBLERS: dict[str, V2Assembler] = {}


@dataclass(frozen=True)
class V2Builder:
    """Makes a bucket's rows in a worker (the whole file in one sequence: see `transcript_rows`), and
    writes them as CSV or parquet; `run_key` keeps one assembler per run and process."""

    writer: Any
    config: V2Config
    run_key: str

    @property
    def tokenizer(self) -> str:
        return self.config.tokenizer_spec

    def build_key(self, file: PlannedFile) -> list:
        """Writer, catalog, tokenizer and the file's part of the config (the core adds the version)."""
        info, c = file.info, self.config
        counted_by = load_tokenizer(c.tokenizer_spec).describe()
        catalog = getattr(self.writer, "catalog", None) or load_v2_catalog()
        return [
            LAYOUT_REVISION,
            self.writer.describe(),
            catalog.sha256,
            info.n_needles,
            info.label,
            c.samples,
            c.rows_per_transcript,
            c.seed,
            c.format,
            counted_by,
        ]

    def batches(self, file: PlannedFile, rows: tuple, store: Path | None) -> Iterator[RowBatch]:
        info: BucketFile = file.info
        for index, transcript, row in transcript_rows(self._assembler(), self.config, info.n_needles, info.where):
            record = {"bin": info.label, "prompt_tokens": row.context_len, "n_tokens": row.context_len}
            record["n_needles"] = info.n_needles
            yield RowBatch([row], [record | {"transcript": index, "counted": row_counted(row, len(transcript.turns))}])

    def open_file(self, path: Path, groups: Sequence[int], durable: bool = True) -> V2Sink:
        # Its files are planned whole (never cut into parts) and grouped by key as they are built.
        metadata = recipe_metadata("mrcr-v2", "1") if self.config.format == "parquet" else None
        return V2Sink(V2FileWriter(path, self.config.format, metadata=metadata))

    def join_file(self, path: Path) -> NoReturn:
        raise NotImplementedError("MRCR v2 files are built whole, never joined from parts")

    def sharing_writer(self) -> None:
        return None

    def release(self) -> None:
        _ASSEMBLERS.clear()

    def _assembler(self) -> V2Assembler:
        if self.run_key not in _ASSEMBLERS:
            _ASSEMBLERS.clear()
            catalog = getattr(self.writer, "catalog", None) or load_v2_catalog()
            _ASSEMBLERS[self.run_key] = V2Assembler(
                writer=self.writer, catalog=catalog, tokenizer=self.config.tokenizer_spec
            )
        return _ASSEMBLERS[self.run_key]


def row_counted(row: V2Row, n_turns: int) -> dict:
    """What the sidecar records of the counts a row's checks need (`_counted`), sealed with its totals."""
    answer, positions = row.answer_token_count, row.relevant_context_positions
    return RowCounted(row.context_len, answer, n_turns, row.index_positions_of_seeds, positions).record()


class V2Sink:
    """A `V2FileWriter` as the core's file sink: rows added in order, the file in place on close."""

    def __init__(self, writer: V2FileWriter) -> None:
        self.writer = writer

    def add(self, rows: list[V2Row]) -> None:
        for row in rows:
            self.writer.write(row)

    def close(self) -> None:
        self.writer.close()

    @property
    def sha256(self) -> str | None:
        """The closed file's sha256, computed as it was written (CSV), or None: read by the core."""
        return self.writer.sha256

    def abort(self) -> None:
        self.writer.close(RuntimeError("aborted"))


def file_summary(file: WrittenFile) -> dict:
    """What the card and the summary table show of a written file, from its sidecar records."""
    info: BucketFile = file.planned.info
    lengths = [record["n_tokens"] for record in file.records]
    return {
        "file": file.relative_path,
        "n_needles": info.n_needles,
        "bucket": info.label,
        "rows": len(lengths),
        "transcripts": len({record["transcript"] for record in file.records}),
        "min": min(lengths),
        "median": int(statistics.median(lengths)),
        "max": max(lengths),
    }


def v2_generation(config: V2Config, writer) -> dict:
    """What makes the folder's files, by option name (see `mrcr_gen._card.claim_folder`)."""
    return {
        "recipe": "mrcr-v2",
        "needles": sorted(set(config.needles)),
        "bin": None if config.tokens is not None else [b.label for b in dict.fromkeys(config.buckets)],
        "tokens": config.tokens,
        "samples": config.samples,
        "seed": config.seed,
        "rows-per-transcript": config.rows_per_transcript,
        "format": config.format,
        "tokenizer": config.tokenizer_spec,
        "writer": writer.describe(),
    }


V2_TITLE = "# MRCR v2 dataset generated by mrcr-gen"


def v2_card_frame(config: V2Config) -> CardFrame:
    """The Hub's YAML lines: a `datasets` config per needle count (the core adds which tokenizer
    counted, read back by mrcr-validate, and the generation and its files)."""
    return CardFrame(
        hub=("license: mit", "pretty_name: MRCR v2 (generated by mrcr-gen)", "tags:", "- long-context", "- mrcr"),
        configs=tuple((f"{n}needle", f"{n}needle/*.{config.format}") for n in dict.fromkeys(config.needles)),
        recorded=(("recipe", "mrcr-v2"),),
        title=V2_TITLE,
    )


def v2_card_body(config: V2Config, writer, result: GenerationResult, command: str) -> str:
    """The card's text below the YAML header."""
    summaries = [file_summary(file) for file in result.files]
    catalog = load_v2_catalog()
    counted_by = load_tokenizer(config.tokenizer_spec).describe()
    catalog_line = (
        f"{len(catalog.formats)} formats x {len(catalog.styles)} styles; {len(catalog.needle_topics)} needle topics, "
        f"{len(catalog.filler_topics)} filler topics; sha256 `{catalog.sha256}`"
    )
    tokenizer = f"{counted_by['spec']} ({counted_by['library']})" + "".join(
        f", {key} `{value}`" for key, value in counted_by.items() if key not in ("spec", "library")
    )
    table = "\n".join(
        (
            f"| {s['n_needles']} | {s['bucket']} | {s['rows']} | {s['transcripts']} | {s['min']} | {s['median']} | "
            f"{s['max']} | `{s['file']}` |"
        )
        for s in summaries
    )
    index, count = config.shard
    return (
        V2_TITLE
        + f"""

| | |
|---|---|
| recipe | mrcr-v2 (the layout of google-deepmind/eval_hub `mrcr_v2`, our own catalog and text) |
| mrcr-gen version | {__version__} |
| command | `{command}` |
| seed | {config.seed} |
| shard | {index}/{count} |
| rows per transcript | at most {config.rows_per_transcript} |
| catalog | {catalog_line} |
| tokenizer | {tokenizer}; `context_len` = tokens of the whole `queries` string as one text |
| writer | `{json.dumps(writer.describe(), sort_keys=True)}` |

Columns (upstream order): `queries` (few-shot block, transcript and final query as one string),
`answer` (12-character hash + the writing, no separator), `context_len`, `answer_token_count`
(tokens of the writing without the hash), `view_ops` (the final query, the tail of `queries`),
`num_relevant`, `answer_context_position`, `index_positions_of_seeds`,
`relevant_context_positions` (turn indices after the few-shot block, and [start, end) token spans
of whole turns in the tokenized `queries`).

## Rows per needle count and bucket

| needles | bucket | rows | transcripts | min context_len | median | max | file |
|---|---|---|---|---|---|---|---|
{table}
"""
    )
