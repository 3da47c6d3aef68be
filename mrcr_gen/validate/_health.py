"""The health report (`mrcr-validate DIR --compare REF`): the statistics that decide whether a set
behaves like another, for one recipe's files, read through that recipe's declarations (its
`CheckSpec` and the `ProbeRow`s its `ProbeSpec` reads).

* writing tokens per format (p10, median, p90) over a seeded sample of SAMPLE_WRITINGS writings,
  and each format's share of every writing;
* needle depth (each needle's slot, (slot + 0.5) / slots) and target depth (the k-th needle's);
* distinct word-trigram share and zlib ratio of each row's writings (as bench/bench_fidelity.py
  measures them), the mean over a seeded sample of SAMPLE_ROWS rows;
* the reference floors (a random writing, a random needle of the right ask) and every shortcut
  probe's mean score, from the validation run with `--shortcuts` (rows the checks reject skipped).
"""

from __future__ import annotations

import random
import re
import zlib
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from .._tokens import DEFAULT_TOKENIZER, count_tokens_batch
from ._files import expand_paths, validate_paths
from ._findings import ValidationReport
from ._shortcuts import PROBES, ProbeRow
from ._spec import CheckSpec

SAMPLE_ROWS = 64  # rows whose writings give the trigram share and the zlib ratio
SAMPLE_WRITINGS = 3000  # writings whose tokens are counted for the lengths per format
WORD = re.compile(r"\w+")


class Spread(BaseModel):
    """p10, median and p90 of some values (None when there are none), and how many there were."""

    count: int = 0
    p10: float | None = None
    median: float | None = None
    p90: float | None = None

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        if not values:
            return cls()
        p10, median, p90 = np.percentile(np.asarray(values, dtype=float), [10, 50, 90])
        return cls(count=len(values), p10=float(p10), median=float(median), p90=float(p90))


class FormatHealth(BaseModel):
    share: float = Field(description="the format's share of every writing")
    tokens: Spread = Field(description="writing tokens, over the sampled writings of the format")


class Health(BaseModel):
    """One dataset's health statistics (one side of `--compare`)."""

    recipe: str
    files: int
    rows: int = Field(description="rows the statistics read (every row the probes can read)")
    errors: dict[str, int] = Field(description="the validation's findings per check")
    formats: dict[str, FormatHealth]
    needle_depth: Spread
    target_depth: Spread
    trigram_share: float | None
    zlib_ratio: float | None
    floors: dict[str, float | None] = Field(description="random_writing, random_needle: mean official score")
    probes: dict[str, float | None] = Field(description="each shortcut probe's mean official score")


def trigram_share(writings: Iterable[str]) -> float | None:
    """Distinct word trigrams / all word trigrams over the writings (none spans two writings)."""
    seen: set[tuple[str, ...]] = set()
    total = 0
    for text in writings:
        words = WORD.findall(text.lower())
        trigrams = list(zip(words, words[1:], words[2:], strict=False))
        seen.update(trigrams)
        total += len(trigrams)
    return len(seen) / total if total else None


def zlib_ratio(writings: Sequence[str]) -> float | None:
    """zlib level-9 compressed size / raw size of the writings joined by blank lines."""
    raw = "\n\n".join(writings).encode("utf-8", "surrogatepass")
    return len(zlib.compress(raw, 9)) / len(raw) if raw else None


class _Sample:
    """A seeded reservoir: at most `size` of the items offered, each kept with equal chance."""

    def __init__(self, size: int, seed: str) -> None:
        self.size, self.rng, self.seen = size, random.Random(seed), 0
        self.items: list[Any] = []

    def offer(self, item: Any) -> None:
        self.seen += 1
        if len(self.items) < self.size:
            self.items.append(item)
        elif (j := self.rng.randrange(self.seen)) < self.size:
            self.items[j] = item


class _Texts:
    """What the rows' texts give: depths, format counts, and the samples."""

    def __init__(self) -> None:
        self.rows = 0
        self.needle_depths: list[float] = []
        self.target_depths: list[float] = []
        self.formats: Counter[str] = Counter()
        self.writings = _Sample(SAMPLE_WRITINGS, "writings")
        self.row_sample = _Sample(SAMPLE_ROWS, "rows")

    def add(self, row: ProbeRow) -> None:
        self.rows += 1
        depths = [(slot + 0.5) / row.n_slots for slot in row.slots]
        self.needle_depths += depths
        self.target_depths.append(depths[row.k - 1])
        formats = row.formats or ("",) * len(row.writings)
        for fmt, text in zip(formats, row.writings, strict=False):
            self.formats[fmt or "(unknown)"] += 1
            self.writings.offer((fmt or "(unknown)", text))
        self.row_sample.offer(row.writings)


def _read_rows(spec: CheckSpec, files: Sequence[Path]) -> _Texts:
    """Every row of the files the recipe's probes can read (others are skipped)."""
    texts = _Texts()
    assert spec.probes is not None
    for path in files:
        try:
            for batch in spec.reader.read(path):
                for record in batch.to_pylist():
                    try:
                        row = spec.probes.row(record)
                    except Exception:  # a row the checks reject: the validation reports it
                        continue
                    if row is not None and row.needles and 1 <= row.k <= len(row.needles) and row.n_slots:
                        texts.add(row)
        except Exception:  # reading stopped: the validation reports the file
            continue
    return texts


def _format_health(texts: _Texts, tokenizer: str, threads: int) -> dict[str, FormatHealth]:
    sampled = texts.writings.items
    counts = count_tokens_batch([text for _, text in sampled], threads, tokenizer) if sampled else []
    by_format: dict[str, list[float]] = {}
    for (fmt, _), n in zip(sampled, counts, strict=True):
        by_format.setdefault(fmt, []).append(n)
    total = sum(texts.formats.values())
    return {
        fmt: FormatHealth(share=count / total, tokens=Spread.of(by_format.get(fmt, [])))
        for fmt, count in sorted(texts.formats.items(), key=lambda kv: (-kv[1], kv[0]))
    }


def _mean(values: Iterable[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None


def _probe_means(report: ValidationReport) -> tuple[dict[str, float | None], dict[str, float | None]]:
    """(each probe's mean score, the floors) over every probed row."""
    groups = report.summary.shortcuts.groups if report.summary.shortcuts is not None else []
    probes: dict[str, float | None] = {}
    for probe in PROBES:
        mine = [g for g in groups if g.probe == probe]
        rows = sum(g.rows for g in mine)
        probes[probe] = sum(g.observed_sum for g in mine) / rows if rows else None
    depth = [g for g in groups if g.probe == "random"]
    floor_rows = sum(g.floor_rows for g in depth)
    rows = sum(g.rows for g in depth)
    floors = {
        "random_writing": sum(g.floor_sum for g in depth) / floor_rows if floor_rows else None,
        "random_needle": sum(g.expected_sum for g in depth) / rows if rows else None,  # E[random probe]
    }
    return probes, floors


def dataset_health(
    spec: CheckSpec,
    inputs: Sequence[str],
    *,
    recipe: str,
    tokens: bool = True,
    workers: int | None = None,
    tokenizer: str | None = None,
) -> tuple[Health, ValidationReport]:
    """One dataset's health statistics, and the validation (with the probes) they come with."""
    if spec.probes is None:
        raise ValueError(f"{recipe} files declare no probes: no health report")
    report = validate_paths(inputs, spec=spec, tokens=tokens, workers=workers, tokenizer=tokenizer, shortcuts=True)
    files, _ = expand_paths(inputs)
    texts = _read_rows(spec, files)
    rows = texts.row_sample.items
    probes, floors = _probe_means(report)
    health = Health(
        recipe=recipe,
        files=report.summary.files,
        rows=texts.rows,
        errors=dict(report.summary.by_check),
        formats=_format_health(texts, tokenizer or DEFAULT_TOKENIZER, workers or 1),
        needle_depth=Spread.of(texts.needle_depths),
        target_depth=Spread.of(texts.target_depths),
        trigram_share=_mean(trigram_share(writings) for writings in rows),
        zlib_ratio=_mean(zlib_ratio(writings) for writings in rows),
        floors=floors,
        probes=probes,
    )
    return health, report


class HealthComparison(BaseModel):
    """`mrcr-validate DIR --compare REF --json`: both sides' statistics."""

    data: Health
    reference: Health


def _number(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _spread(spread: Spread, digits: int = 0) -> str:
    if spread.median is None:
        return "-"
    return f"{spread.median:.{digits}f} ({_number(spread.p10, digits)}-{_number(spread.p90, digits)})"


def health_rows(health: Health) -> dict[str, str]:
    """One side of the health table: statistic -> its text."""
    rows = {
        "rows": str(health.rows),
        "findings": ", ".join(f"{check} {n}" for check, n in health.errors.items()) or "none",
        "needle depth: median (p10-p90)": _spread(health.needle_depth, 3),
        "target depth: median (p10-p90)": _spread(health.target_depth, 3),
        "distinct word-trigram share": _number(health.trigram_share),
        "zlib ratio": _number(health.zlib_ratio),
        "random-writing floor": _number(health.floors.get("random_writing")),
        "random-needle floor": _number(health.floors.get("random_needle")),
    }
    rows |= {f"probe {probe}: mean score": _number(score) for probe, score in health.probes.items()}
    for fmt, stats in health.formats.items():
        rows[f"{fmt}: share"] = f"{stats.share:.3f}"
        rows[f"{fmt}: tokens median (p10-p90)"] = _spread(stats.tokens)
    return rows


def health_table(comparison: HealthComparison, data: str, reference: str) -> Any:
    """The two sides as one rich table (a statistic a side lacks shows '-')."""
    from rich.table import Table

    mine, theirs = health_rows(comparison.data), health_rows(comparison.reference)
    table = Table(title=f"health report ({comparison.data.recipe})")
    table.add_column("statistic")
    table.add_column(data, justify="right", overflow="fold")
    table.add_column(reference, justify="right", overflow="fold")
    for name in [*mine, *(n for n in theirs if n not in mine)]:
        table.add_row(name, mine.get(name, "-"), theirs.get(name, "-"))
    return table
