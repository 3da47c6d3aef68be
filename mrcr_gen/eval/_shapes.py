"""The shapes of what a run's summary adds up from its rows' analyses (`summary.json` `failures`
and `ci`), as Pydantic models: the single source of their fields, exported to `schemas/`
(`failure_summary.schema.json`, `intervals.schema.json`) with the per-row `row_analysis`."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class OutcomeCell(BaseModel):
    """One bin x needle count: what the replies returned, crossed with their prefix state."""

    model_config = ConfigDict(extra="forbid")

    bin: str
    n_needles: int
    count: int  # rows of the cell: scored, errors and skipped
    shares: dict[str, float]  # outcome -> share of the cell's rows (every outcome of `_failures.OUTCOMES`)
    prefix: dict[str, int]  # prefix state (ok, late, missing; none: no reply analysed) -> rows
    crossed: dict[str, dict[str, int]]  # outcome -> prefix state -> rows (outcomes the cell has)


class OrdinalConfusion(BaseModel):
    """Per needle count: how often needle k was asked and needle j returned (0: no needle)."""

    model_config = ConfigDict(extra="forbid")

    n_needles: int
    asked: list[int]
    returned: list[int]
    counts: list[list[int]]


class DepthGrid(BaseModel):
    """Per needle count: the mean score by target-depth decile (rows) x context bin (columns)."""

    model_config = ConfigDict(extra="forbid")

    n_needles: int
    deciles: list[str]
    bins: list[str]
    mean_score: list[list[float | None]]
    count: list[list[int]]


class FailureSummary(BaseModel):
    """`summary.json` `failures`."""

    model_config = ConfigDict(extra="forbid")

    analysed_rows: int
    outcomes: list[OutcomeCell]
    ordinal_confusion: list[OrdinalConfusion]
    depth: list[DepthGrid]


class Intervals(BaseModel):
    """`summary.json` `ci`: bootstrap intervals ([low, high]; null where the number has no value)."""

    model_config = ConfigDict(extra="forbid")

    level: float
    replicates: int
    seed: int
    resampled: str
    mean_score: list[float] | None
    bins: dict[str, list[float] | None]
    auc_128k: list[float] | None
    auc_1m: list[float] | None
