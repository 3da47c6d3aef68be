"""Shortcut probes (`mrcr-validate --shortcuts`): model-free solvers that answer every row without
reading which writing the query asks for, scored as the official grader scores them, beside what
each would score if the needles had been placed uniformly at random.

A recipe declares how a row shows its needles (`ProbeSpec.row`: a `ProbeRow`) and its official
score of one writing against another (`ProbeSpec.score`, the prefix taken as right); everything
else is here. The null model ("uniform placement") is the one real MRCR follows: the n needle asks
take n of the conversation's S ask slots, drawn uniformly, and the row's n needle writings are
assigned to them in a uniformly random order, the ordinal k asked for as in the row. Given the
row's own writings, k and S, each probe's expected score and its variance are then exact (or, for
the depth probe, a seeded simulation of the slot draw), so rows of any mix of lengths add up:

* a position probe picks an ordinal c from the needles' slots (first, last, a seeded random one,
  the one nearest depth (k - 0.5)/n). With p = P(c = k) under the null and o_i the score of needle i
  against the target, E = p + (1 - p) mean_{i != k} o_i (the other writings are exchangeable);
* a length probe picks a writing (the longest, the shortest) whatever its slot: under the null the
  target is any of the n writings alike, so E = mean_j score(chosen, w_j);
* `final_turn` answers the conversation's last writing: a needle (the n-th) with probability n/S,
  else a distractor, which scores like the row's random-writing floor.

A probe's excess in a group of rows (token bin x needle count) is the mean of (observed - E); it
is a finding `shortcut` when the group has at least MIN_ROWS rows, the excess is at least
MARGIN and z = sum(observed - E) / sqrt(sum Var) is at least Z (one-sided normal bound, p < 1e-4
per group and probe, so a uniformly placed set of a few dozen groups raises no false alarm).
"""

from __future__ import annotations

import functools
import hashlib
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, computed_field

from .._bins import label_sort_key

#: The probes, in report order.
PROBES: tuple[str, ...] = ("depth", "first", "last", "random", "longest", "shortest", "final_turn")
#: Position probes: they choose an ordinal from the needles' slots alone.
POSITION_PROBES = ("depth", "first", "last", "random")
MIN_ROWS = 20  # rows a group needs before its probes can be a finding
MARGIN = 0.05  # mean excess over the expectation (5 points of score) that is a shortcut
Z = 3.72  # one-sided normal bound: P(z >= 3.72) < 1e-4 under the null
FLOOR_SAMPLES = 16  # writings graded for the random-writing floor (exact when fewer)
SIMULATIONS = 4000  # slot draws simulating the depth probe's hit probability
#: A row's writings, graded: (reply writing, target writing) -> the official score with the right prefix.
Score = Callable[[str, str], float]


@dataclass(frozen=True)
class ProbeRow:
    """What the probes read of a row: the needle writings in conversation order, their ask slots
    (0-based among the conversation's `n_slots` ask/writing turns), the ordinal asked for, every
    writing of the conversation in order (needles included) and the format each slot's ask names
    ("" when it names none; the health report's `--compare` reads them)."""

    needles: tuple[str, ...]
    slots: tuple[int, ...]
    n_slots: int
    k: int
    writings: tuple[str, ...]
    formats: tuple[str, ...] = ()


@dataclass(frozen=True)
class ProbeSpec:
    """A recipe's probes declaration (picklable: module-level functions). `row(record)` returns the
    row's `ProbeRow`, or None when it cannot tell (the row is then skipped and counted)."""

    row: Callable[[dict[str, Any]], ProbeRow | None]
    score: Score


class ProbeOutcome(BaseModel):
    """One row's probes: each probe's score and its expectation and variance under uniform placement;
    `skipped` says why a row was not probed."""

    model_config = ConfigDict(frozen=True)

    observed: dict[str, float] = Field(default_factory=dict)
    expected: dict[str, float] = Field(default_factory=dict)
    variance: dict[str, float] = Field(default_factory=dict)
    floor: float | None = None
    skipped: str | None = None


def _depth_choice(depths: np.ndarray, k: int, n: int) -> np.ndarray:
    """The ordinal (0-based) nearest depth (k - 0.5)/n, along the last axis (first one on a tie)."""
    return np.argmin(np.abs(depths - (k - 0.5) / n), axis=-1)


@functools.lru_cache(maxsize=1024)
def depth_hits(n: int, n_slots: int) -> tuple[float, ...]:
    """P(the depth probe picks the k-th needle), k = 1..n, when n of `n_slots` slots are drawn
    uniformly: a seeded simulation (SIMULATIONS draws), cached per (n, slots)."""
    rng = np.random.default_rng(n_slots * 64 + n)
    if n_slots <= n:
        slots = np.tile(np.arange(n), (1, 1))
    elif n_slots <= 256:  # sort random keys: exact draws without replacement
        keys = rng.random((SIMULATIONS, n_slots))
        slots = np.sort(np.argpartition(keys, n - 1, axis=1)[:, :n], axis=1)
    else:  # many slots: draw with replacement and redraw the rare draws with a repeated slot
        slots = np.sort(rng.integers(0, n_slots, (SIMULATIONS, n)), axis=1)
        while (bad := (np.diff(slots, axis=1) == 0).any(axis=1)).any():
            slots[bad] = np.sort(rng.integers(0, n_slots, (int(bad.sum()), n)), axis=1)
    depths = (slots + 0.5) / max(n_slots, n)
    return tuple(float(np.mean(_depth_choice(depths, k, n) == k - 1)) for k in range(1, n + 1))


def _hit_probability(probe: str, n: int, k: int, n_slots: int) -> float:
    if probe == "first":
        return float(k == 1)
    if probe == "last":
        return float(k == n)
    if probe == "random":
        return 1 / n
    return depth_hits(n, n_slots)[k - 1]


def _seed(row: ProbeRow, what: str) -> random.Random:
    """A generator seeded by the row's own text (the same on every worker and run)."""
    digest = hashlib.blake2b(f"{what}:{row.k}:{row.n_slots}:".encode() + row.needles[row.k - 1].encode(), digest_size=8)
    return random.Random(digest.hexdigest())


def _position_choice(probe: str, row: ProbeRow) -> int:
    n = len(row.needles)
    if probe == "first":
        return 0
    if probe == "last":
        return n - 1
    if probe == "random":
        return _seed(row, "random").randrange(n)
    depths = (np.asarray(row.slots) + 0.5) / row.n_slots
    return int(_depth_choice(depths, row.k, n))


def _moments(values: Sequence[float]) -> tuple[float, float]:
    """(mean, variance) of a uniform draw among `values`."""
    mean = sum(values) / len(values)
    return mean, max(0.0, sum(v * v for v in values) / len(values) - mean * mean)


def measure(row: ProbeRow, score: Score) -> ProbeOutcome:
    """Every probe on one row: its score, and its expectation and variance under uniform placement."""
    n, t = len(row.needles), row.k - 1
    target = row.needles[t]
    vs_target = [1.0 if i == t else score(w, target) for i, w in enumerate(row.needles)]
    others = [v for i, v in enumerate(vs_target) if i != t]
    other_mean = sum(others) / len(others) if others else 0.0
    other_sq = sum(v * v for v in others) / len(others) if others else 0.0
    observed: dict[str, float] = {}
    expected: dict[str, float] = {}
    variance: dict[str, float] = {}
    for probe in POSITION_PROBES:
        p = _hit_probability(probe, n, row.k, row.n_slots)
        observed[probe] = vs_target[_position_choice(probe, row)]
        expected[probe] = p + (1 - p) * other_mean
        variance[probe] = max(0.0, p + (1 - p) * other_sq - expected[probe] ** 2)
    lengths = [len(w) for w in row.needles]
    for probe, chosen in (("longest", lengths.index(max(lengths))), ("shortest", lengths.index(min(lengths)))):
        against = [1.0 if j == chosen else score(row.needles[chosen], w) for j, w in enumerate(row.needles)]
        observed[probe] = vs_target[chosen]
        expected[probe], variance[probe] = _moments(against)
    sample = list(row.writings)
    if len(sample) > FLOOR_SAMPLES:
        sample = _seed(row, "floor").sample(sample, FLOOR_SAMPLES)
    floor = _moments([score(w, target) for w in sample]) if sample else (0.0, 0.0)
    last_is_needle = bool(row.slots) and row.slots[-1] == row.n_slots - 1
    observed["final_turn"] = vs_target[-1] if last_is_needle else score(row.writings[-1], target)
    q = min(1.0, n / row.n_slots)
    hit, hit_sq = (1.0, 1.0) if row.k == n else (other_mean, other_sq)
    expected["final_turn"] = q * hit + (1 - q) * floor[0]
    second = q * hit_sq + (1 - q) * (floor[1] + floor[0] ** 2)
    variance["final_turn"] = max(0.0, second - expected["final_turn"] ** 2)
    return ProbeOutcome(observed=observed, expected=expected, variance=variance, floor=floor[0] if sample else None)


def probe_record(spec: ProbeSpec, record: dict[str, Any]) -> ProbeOutcome:
    """The probes of one raw row, or an outcome that says why it was skipped; never raises."""
    try:
        row = spec.row(record)
    except Exception as exc:  # a row the checks let through but the probes cannot read: skipped, counted
        return ProbeOutcome(skipped=f"unreadable: {type(exc).__name__}")
    if row is None or not row.needles or not 1 <= row.k <= len(row.needles) or row.n_slots < len(row.needles):
        return ProbeOutcome(skipped="no needles the probes can read")
    return measure(row, spec.score)


class ShortcutGroup(BaseModel):
    """One probe over the rows of one token bin and needle count: sums, so groups merge by adding."""

    probe: str
    bin: str
    n_needles: str
    rows: int = 0
    observed_sum: float = 0.0
    expected_sum: float = 0.0
    variance_sum: float = 0.0
    floor_sum: float = 0.0
    floor_rows: int = 0

    def add(self, outcome: ProbeOutcome) -> None:
        self.rows += 1
        self.observed_sum += outcome.observed[self.probe]
        self.expected_sum += outcome.expected[self.probe]
        self.variance_sum += outcome.variance[self.probe]
        if outcome.floor is not None:
            self.floor_sum += outcome.floor
            self.floor_rows += 1

    def merged(self, other: ShortcutGroup) -> ShortcutGroup:
        sums = ("rows", "observed_sum", "expected_sum", "variance_sum", "floor_sum", "floor_rows")
        return self.model_copy(update={name: getattr(self, name) + getattr(other, name) for name in sums})

    @computed_field  # type: ignore[prop-decorator]
    @property
    def observed(self) -> float:
        """The probe's mean official score."""
        return self.observed_sum / self.rows if self.rows else 0.0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def expected(self) -> float:
        """Its mean expectation under uniform needle placement."""
        return self.expected_sum / self.rows if self.rows else 0.0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def floor(self) -> float | None:
        """The rows' random-writing floor (a writing of the conversation drawn at random)."""
        return self.floor_sum / self.floor_rows if self.floor_rows else None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def z(self) -> float:
        """sum(observed - expected) / sqrt(sum of the null variances)."""
        excess = self.observed_sum - self.expected_sum
        if self.variance_sum <= 0:
            return 0.0 if abs(excess) < 1e-9 else math.copysign(math.inf, excess)
        return excess / math.sqrt(self.variance_sum)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def shortcut(self) -> bool:
        """The probe beats uniform placement by a clear margin on enough rows."""
        return self.rows >= MIN_ROWS and self.observed - self.expected >= MARGIN and self.z >= Z


class ShortcutReport(BaseModel):
    """`summary.shortcuts` of `mrcr-validate --shortcuts --json`: every probe per bin and needle count,
    and the rows not probed (a check rejected them, or their needles cannot be read) by reason."""

    groups: list[ShortcutGroup] = Field(default_factory=list)
    skipped: dict[str, int] = Field(default_factory=dict)

    def merged(self, other: ShortcutReport) -> ShortcutReport:
        by_key = {(g.probe, g.bin, g.n_needles): g for g in self.groups}
        for group in other.groups:
            key = (group.probe, group.bin, group.n_needles)
            by_key[key] = by_key[key].merged(group) if key in by_key else group
        skipped = dict(self.skipped)
        for reason, count in other.skipped.items():
            skipped[reason] = skipped.get(reason, 0) + count
        return ShortcutReport(groups=_ordered(by_key.values()), skipped=skipped)


def _ordered(groups: Sequence[ShortcutGroup] | Any) -> list[ShortcutGroup]:
    def key(g: ShortcutGroup) -> tuple:
        needles = int(g.n_needles) if g.n_needles.isdigit() else 1 << 30
        return (label_sort_key(g.bin), needles, PROBES.index(g.probe) if g.probe in PROBES else len(PROBES))

    return sorted(groups, key=key)


class ShortcutTally:
    """The probes of every row one report sees, by bin and needle count."""

    def __init__(self) -> None:
        self.groups: dict[tuple[str, str, str], ShortcutGroup] = {}
        self.skipped: dict[str, int] = {}

    def add(self, outcome: ProbeOutcome, bin_key: str, needles: str, rejected: bool) -> None:
        reason = "a check rejected the row" if rejected else outcome.skipped
        if reason is not None:
            self.skipped[reason] = self.skipped.get(reason, 0) + 1
            return
        for probe in PROBES:
            key = (probe, bin_key, needles)
            self.groups.setdefault(key, ShortcutGroup(probe=probe, bin=bin_key, n_needles=needles)).add(outcome)

    def build(self) -> ShortcutReport:
        return ShortcutReport(groups=_ordered(self.groups.values()), skipped=dict(self.skipped))


def shortcut_message(group: ShortcutGroup) -> str:
    """The finding's text for a probe that beats uniform placement."""
    return (
        f"probe '{group.probe}' scores {group.observed:.3f} on {group.rows} rows of bin {group.bin} with "
        f"{group.n_needles} needles, {group.observed - group.expected:+.3f} over its {group.expected:.3f} under "
        f"uniform needle placement (z = {group.z:.1f}): the rows can be solved without reading them"
    )
