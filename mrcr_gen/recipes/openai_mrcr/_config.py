"""What an openai/mrcr generation run is asked for (`GenerateConfig`), how it is planned into files
and rows, and what it returns."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pydantic import Field, field_validator, model_validator

from ..._bins import BINS, Bin
from ..._models import _Frozen
from ..._seeding import derive_seed
from ..._tokens import DEFAULT_TOKENIZER
from ._assembler import tokens_window
from ._models import is_real_date
from ._options import DEFAULT_DATE_ADDED, ROWS_PER_FILE

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

    @property
    def max_tokens(self) -> int:
        """The most tokens the row can have (the core sizes work units by it)."""
        return self.bin.upper if self.bin is not None else self.tokens or 0


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
                files.append(
                    FilePlan(
                        n_needles=n, file_index=k // self.rows_per_file, rows=tuple(specs[k : k + self.rows_per_file])
                    )
                )
        return files

    def shard_plan(self) -> list[FilePlan]:
        """The files this shard writes: file i of the whole plan goes to shard i mod N."""
        index, count = self.shard
        return [f for i, f in enumerate(self.plan()) if i % count == index - 1]


class GenerateResult(_Frozen):
    files: tuple[Path, ...]
    samples: tuple[dict, ...]  # Sample.metadata() of every row written
