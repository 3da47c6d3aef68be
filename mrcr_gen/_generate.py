"""Dataset generation: plan rows into files, assemble them, write parquet, sidecars and a card."""

from __future__ import annotations

import hashlib
import json
import re
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import Field, field_validator, model_validator

from ._assembler import LAYOUT_REVISION, Assembler, tokens_window
from ._bins import BINS, Bin, bin_sort_key
from ._catalog import load_catalog
from ._files import atomic_path, write_text_atomic
from ._models import Sample, _Frozen, is_real_date
from ._parquet import write_rows
from ._seeding import derive_seed
from ._tokens import DEFAULT_TOKENIZER, load_tokenizer
from ._version import __version__
from .writers._base import Writer

# Fixed so that the same command and seed give byte-identical files on any day.
DEFAULT_DATE_ADDED = "12-02-2026"
ROWS_PER_FILE = 400
#: The smallest and largest `tokens` whose every row lies inside the bins, [4096, 1048576].
TOKENS_RANGE = (
    next(t for t in range(BINS[0].smallest, 2 * BINS[0].smallest) if tokens_window(t)[0] >= BINS[0].smallest),
    BINS[-1].upper,
)


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
    tokens: int | None = None
    samples: int = Field(default=100, ge=1)
    seed: int = 0
    out: Path = Path("mrcr-data")
    rows_per_file: int = Field(default=ROWS_PER_FILE, ge=1)
    shard: tuple[int, int] = (1, 1)
    date_added: str = DEFAULT_DATE_ADDED

    @field_validator("date_added")
    @classmethod
    def _real_date(cls, value: str) -> str:
        if not is_real_date(value):
            raise ValueError(f"{value!r} is not a calendar date as MM-DD-YYYY")
        return value

    @field_validator("tokens")
    @classmethod
    def _tokens_inside_the_bins(cls, value: int | None) -> int | None:
        if value is not None and not TOKENS_RANGE[0] <= value <= TOKENS_RANGE[1]:
            lowest, highest = tokens_window(value)
            raise ValueError(
                f"{value} gives rows of {lowest}..{highest} tokens, outside the bins' "
                f"{BINS[0].smallest}..{BINS[-1].upper}; choose {TOKENS_RANGE[0]}..{TOKENS_RANGE[1]}"
            )
        return value
    tokenizer: str = DEFAULT_TOKENIZER  # a spec for mrcr_gen._tokens.load_tokenizer; rows are binned by its count

    @model_validator(mode="after")
    def _check(self) -> GenerateConfig:
        if not self.needles or min(self.needles) < 1:
            raise ValueError("needle counts must be at least 1")
        if self.tokens is not None and "bins" in self.model_fields_set:
            raise ValueError("give tokens or bins, not both (tokens replaces the bins)")
        if self.tokens is None and not self.bins:
            raise ValueError("give at least one bin, or tokens")
        index, count = self.shard
        if not 1 <= index <= count:
            raise ValueError(f"shard {index}/{count}: K must be between 1 and N")
        return self

    def plan(self) -> list[FilePlan]:
        """All files of the dataset (whatever the shard), each with its rows."""
        files = []
        for n in dict.fromkeys(self.needles):
            targets: Sequence[Bin | None] = [None] if self.tokens is not None else list(dict.fromkeys(self.bins))
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
    on_reused: Callable[[int], None] | None = None,
) -> GenerateResult:
    """Generate this shard's files under `config.out`; each file appears atomically when complete.

    A file already written by an identical earlier run (same rows, writer and version, as its
    sidecar records) is kept, so rerunning an interrupted command only writes what is missing.
    """
    assembler = Assembler(writer, date_added=config.date_added, tokenizer=config.tokenizer)
    counted_by = load_tokenizer(config.tokenizer).describe()
    written, metadata = [], []
    for file_plan in config.shard_plan():
        path = config.out / file_plan.relative_path
        build = _build_fingerprint(config, writer, file_plan)
        records = _reusable_sidecar(path, build, len(file_plan.rows))
        if records is None:
            samples = []
            for spec in file_plan.rows:
                sample = sample_for(spec, assembler)
                samples.append(sample)
                if on_row is not None:
                    on_row(sample)
            # The sidecar vouches for the parquet beside it: drop the old one before replacing
            # the parquet, or a crash in between would leave it vouching for different rows.
            sidecar_path(path).unlink(missing_ok=True)
            write_rows([s.row for s in samples], path)
            records = [{"build": build, **s.metadata(), "tokenizer": counted_by["spec"]} for s in samples]
            with atomic_path(sidecar_path(path)) as tmp:
                tmp.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
        elif on_reused is not None:
            on_reused(len(records))
        written.append(path)
        metadata += [{k: v for k, v in r.items() if k not in ("build", "tokenizer")} | {"n_needles": file_plan.n_needles} for r in records]
    result = GenerateResult(files=tuple(written), samples=tuple(metadata))
    write_text_atomic(config.out / _card_name(config), dataset_card(config, writer, result, command))
    return result


def sidecar_path(parquet_path: Path) -> Path:
    return parquet_path.with_name(parquet_path.name.removesuffix(".parquet") + ".samples.jsonl")


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


def _card_name(config: GenerateConfig) -> str:
    index, count = config.shard
    return "README.md" if count == 1 else f"README.shard-{index}-of-{count}.md"


def summarize(samples: Sequence[dict]) -> list[dict]:
    """Rows per (needles, bin) with min/median/max tokens, in bin order."""
    groups: dict[tuple[int, str], list[int]] = {}
    for s in samples:
        groups.setdefault((s["n_needles"], s["bin"]), []).append(s["n_tokens"])
    return [
        {
            "n_needles": n,
            "bin": label,
            "rows": len(tokens),
            "min": min(tokens),
            "median": int(statistics.median(tokens)),
            "max": max(tokens),
        }
        for (n, label), tokens in sorted(groups.items(), key=lambda kv: (kv[0][0], bin_sort_key(kv[0][1])))
    ]


def card_header(config: GenerateConfig) -> str:
    """The Hub's YAML header: one `datasets` config per needle count (`load_dataset(OUT, "4needle")`),
    license, task tags, and which tokenizer counted (read back by mrcr-validate)."""
    counted_by = load_tokenizer(config.tokenizer).describe()
    lines = [
        "---",
        "license: mit",
        "pretty_name: MRCR (generated by mrcr-gen)",
        "task_categories:",
        "- text-generation",
        "- question-answering",
        "tags:",
        "- long-context",
        "- mrcr",
        "- synthetic",
        "configs:",
    ]
    for n in sorted(set(config.needles)):
        lines += [
            f"- config_name: {n}needle",
            "  data_files:",
            "  - split: train",
            f"    path: {n}needle/*.parquet",
        ]
    lines += ["mrcr_gen:", f"  version: {json.dumps(__version__)}"]
    lines += [f"  tokenizer{'' if key == 'spec' else '_' + key}: {json.dumps(value)}" for key, value in counted_by.items()]
    return "\n".join(lines) + "\n---\n\n"


CARD_TOKENIZER = re.compile(r'^  tokenizer: (".*")$', re.MULTILINE)


def card_tokenizer(card_text: str) -> str | None:
    """The tokenizer spec a dataset card's YAML header names, or None (e.g. openai/mrcr's own card)."""
    if not card_text.startswith("---\n"):
        return None
    header = card_text[4 : card_text.find("\n---", 4)]
    match = CARD_TOKENIZER.search(header)
    return json.loads(match.group(1)) if match else None


def dataset_card(config: GenerateConfig, writer: Writer, result: GenerateResult, command: str) -> str:
    catalog = load_catalog()
    counted_by = load_tokenizer(config.tokenizer).describe()
    tokenizer = f"{counted_by['spec']} ({counted_by['library']})" + "".join(
        f", {key} `{value}`" for key, value in counted_by.items() if key not in ("spec", "library")
    )
    table = "\n".join(
        f"| {g['n_needles']} | {g['bin']} | {g['rows']} | {g['min']} | {g['median']} | {g['max']} |"
        for g in summarize(result.samples)
    )
    files = "\n".join(f"- `{path.relative_to(config.out)}`" for path in result.files)
    index, count = config.shard
    return card_header(config) + f"""# MRCR dataset generated by mrcr-gen

| | |
|---|---|
| mrcr-gen version | {__version__} |
| command | `{command}` |
| seed | {config.seed} |
| shard | {index}/{count} |
| date_added | {config.date_added} |
| catalog | {len(catalog.entities)} entities x {len(catalog.formats)} formats, sha256 `{catalog.sha256}` |
| tokenizer | {tokenizer}; count = sum of message contents + answer |
| writer | `{json.dumps(writer.describe(), sort_keys=True)}` |

Schema: the exact openai/mrcr columns. Load one needle count with
`datasets.load_dataset(FOLDER, "4needle", split="train")`. Per-row metadata (needle positions, token count, bin, needle
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
