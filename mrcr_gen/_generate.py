"""Dataset generation: plan rows into files, assemble them, write parquet, sidecars and a card."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import Field, model_validator

from ._assembler import Assembler
from ._bins import BINS, Bin
from ._catalog import load_catalog
from ._files import atomic_path, write_text_atomic
from ._models import DATE_ADDED_PATTERN, Sample, _Frozen
from ._parquet import write_rows
from ._seeding import derive_seed
from ._tokens import O200K_SHA256
from ._version import __version__
from .writers._base import Writer

# Fixed so that the same command and seed give byte-identical files on any day.
DEFAULT_DATE_ADDED = "12-02-2026"
ROWS_PER_FILE = 400


class RowSpec(_Frozen):
    """Everything that determines one row: it is a pure function of this and the writer."""

    n_needles: int
    bin: Bin | None
    tokens: int | None
    index: int
    seed: int

    @property
    def row_seed(self) -> int:
        where = self.bin.upper if self.bin is not None else f"tokens={self.tokens}"
        return derive_seed(self.seed, self.n_needles, where, self.index)


class FilePlan(_Frozen):
    n_needles: int
    file_index: int
    rows: tuple[RowSpec, ...]

    @property
    def relative_path(self) -> str:
        return f"{self.n_needles}needle/{self.n_needles}needle_{self.file_index}.parquet"


class GenerateConfig(_Frozen):
    needles: tuple[int, ...] = (4,)
    bins: tuple[Bin, ...] = BINS
    tokens: int | None = Field(default=None, ge=1)
    samples: int = Field(default=100, ge=1)
    seed: int = 0
    out: Path = Path("mrcr-data")
    rows_per_file: int = Field(default=ROWS_PER_FILE, ge=1)
    shard: tuple[int, int] = (1, 1)
    date_added: str = Field(default=DEFAULT_DATE_ADDED, pattern=DATE_ADDED_PATTERN)

    @model_validator(mode="after")
    def _check(self) -> GenerateConfig:
        if not self.needles or min(self.needles) < 1:
            raise ValueError("needle counts must be at least 1")
        index, count = self.shard
        if not 1 <= index <= count:
            raise ValueError(f"shard {index}/{count}: K must be between 1 and N")
        return self

    def plan(self) -> list[FilePlan]:
        """All files of the dataset (whatever the shard), each with its rows."""
        files = []
        for n in dict.fromkeys(self.needles):
            targets: Sequence[Bin | None] = [None] if self.tokens is not None else self.bins
            specs = [
                RowSpec(n_needles=n, bin=b, tokens=self.tokens, index=i, seed=self.seed)
                for b in targets
                for i in range(self.samples)
            ]
            for k in range(0, len(specs), self.rows_per_file):
                files.append(FilePlan(n_needles=n, file_index=k // self.rows_per_file, rows=tuple(specs[k : k + self.rows_per_file])))
        return files

    def shard_plan(self) -> list[FilePlan]:
        """The files this shard writes: file i of the whole plan goes to shard i mod N."""
        index, count = self.shard
        return [f for i, f in enumerate(self.plan()) if i % count == index - 1]


class GenerateResult(_Frozen):
    files: tuple[Path, ...]
    samples: tuple[dict, ...]  # Sample.metadata() of every row written


def sample_for(spec: RowSpec, assembler: Assembler) -> Sample:
    return assembler.sample(n_needles=spec.n_needles, seed=spec.row_seed, token_bin=spec.bin, tokens=spec.tokens)


def generate_dataset(
    config: GenerateConfig,
    writer: Writer,
    *,
    command: str = "",
    on_row: Callable[[Sample], None] | None = None,
) -> GenerateResult:
    """Generate this shard's files under `config.out`; each file appears atomically when complete."""
    assembler = Assembler(writer, date_added=config.date_added)
    written, metadata = [], []
    for file_plan in config.shard_plan():
        samples = []
        for spec in file_plan.rows:
            sample = sample_for(spec, assembler)
            samples.append(sample)
            if on_row is not None:
                on_row(sample)
        path = config.out / file_plan.relative_path
        write_rows([s.row for s in samples], path)
        _write_sidecar(path, samples)
        written.append(path)
        metadata += [s.metadata() | {"n_needles": s.row.n_needles} for s in samples]
    result = GenerateResult(files=tuple(written), samples=tuple(metadata))
    write_text_atomic(config.out / _card_name(config), dataset_card(config, writer, result, command))
    return result


def sidecar_path(parquet_path: Path) -> Path:
    return parquet_path.with_name(parquet_path.name.removesuffix(".parquet") + ".samples.jsonl")


def _write_sidecar(parquet_path: Path, samples: list[Sample]) -> None:
    """Metadata the real schema lacks, one JSON line per parquet row, in row order."""
    with atomic_path(sidecar_path(parquet_path)) as tmp:
        tmp.write_text("".join(json.dumps(s.metadata()) + "\n" for s in samples), encoding="utf-8")


def _card_name(config: GenerateConfig) -> str:
    index, count = config.shard
    return "README.md" if count == 1 else f"README.shard-{index}-of-{count}.md"


def summarize(samples: Sequence[dict]) -> list[dict]:
    """Rows per (needles, bin) with min/median/max tokens, in bin order."""
    groups: dict[tuple[int, str], list[int]] = {}
    for s in samples:
        groups.setdefault((s["n_needles"], s["bin"]), []).append(s["n_tokens"])
    order = {str(b): i for i, b in enumerate(BINS)}
    return [
        {
            "n_needles": n,
            "bin": label,
            "rows": len(tokens),
            "min": min(tokens),
            "median": int(statistics.median(tokens)),
            "max": max(tokens),
        }
        for (n, label), tokens in sorted(groups.items(), key=lambda kv: (kv[0][0], order.get(kv[0][1], 99), kv[0][1]))
    ]


def dataset_card(config: GenerateConfig, writer: Writer, result: GenerateResult, command: str) -> str:
    catalog = load_catalog()
    table = "\n".join(
        f"| {g['n_needles']} | {g['bin']} | {g['rows']} | {g['min']} | {g['median']} | {g['max']} |"
        for g in summarize(result.samples)
    )
    files = "\n".join(f"- `{path.relative_to(config.out)}`" for path in result.files)
    index, count = config.shard
    return f"""# MRCR dataset generated by mrcr-gen

| | |
|---|---|
| mrcr-gen version | {__version__} |
| command | `{command}` |
| seed | {config.seed} |
| shard | {index}/{count} |
| date_added | {config.date_added} |
| catalog | {len(catalog.entities)} entities x {len(catalog.formats)} formats, sha256 `{catalog.sha256}` |
| tokenizer | o200k_base (tiktoken), vocabulary sha256 `{O200K_SHA256}`; count = sum of message contents + answer |
| writer | `{json.dumps(writer.describe(), sort_keys=True)}` |

Schema: the exact openai/mrcr columns. Per-row metadata (needle positions, token count, bin, needle
format and entity, seed) is in the `*.samples.jsonl` file beside each parquet file, one line per row.

## Rows per needle count and bin

| needles | bin | rows | min tokens | median tokens | max tokens |
|---|---|---|---|---|---|
{table}

## Files

{files}
"""


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
    from ._bins import bin_by_upper
    from .writers import OfflineWriter

    spec = RowSpec(
        n_needles=n_needles,
        bin=None if tokens is not None else bin_by_upper(bin_upper),
        tokens=tokens,
        index=seed,
        seed=seed,
    )
    return sample_for(spec, Assembler(writer or OfflineWriter(seed), date_added=date_added))
