"""The quality report of a pool: writing lengths per format beside a reference, duplicates, empty
writings, and replies that refuse or talk about the ask instead of answering it.

Flagged replies (`flag`) are found by cheap rules kept as data in `formats/quality_rules.json`
(regular expressions anchored at the start of a writing; the file says why). A flagged writing
stays in the pool file and is listed in the report, but `PoolWriter` never offers it for a needle
slot: a needle's writing is the answer a model must reproduce, and "Could you provide more
context?" is no writing. Near duplicates are writings equal up to case and whitespace
(`normalize_writing`, the assembler's own test) but not identical.

The reference is what a recipe declares (openai/mrcr: the official GPT-4o writings' figures of
its catalog), or the figures of another pool (`reference_of`, e.g. one harvested from the
official files); formats it does not know show no reference.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from .._files import write_text_atomic
from .._models import _Frozen, normalize_writing
from ._flags import FlagKind, flag
from ._pool import PoolWriting, quality_report_path, read_pool

LISTED = 50  # flagged writings and duplicate groups listed in the report, at most, per kind


class TokenFigures(_Frozen):
    """Tokens of a set of writings: median and the 10th and 90th percentiles (nearest rank)."""

    writings: int | None  # None: figures declared without their count (a catalog's)
    median: int
    p10: int
    p90: int

    @classmethod
    def of(cls, counts: Sequence[int]) -> TokenFigures:
        ranked = sorted(counts)

        def at(q: float) -> int:
            return ranked[round(q * (len(ranked) - 1))]

        return cls(writings=len(ranked), median=at(0.5), p10=at(0.1), p90=at(0.9))


class FormatQuality(_Frozen):
    format: str
    tokens: TokenFigures
    reference: TokenFigures | None  # None: the reference does not know this format
    flagged: int


class Flagged(_Frozen):
    id: str
    ask: str
    kind: FlagKind
    rule: str
    start: str  # the writing's first 120 characters


class QualityReport(_Frozen):
    pool: str
    reference: str  # what the reference figures are
    writings: int
    formats: tuple[FormatQuality, ...]
    empty: int
    refusals: int
    meta: int
    exact_duplicates: int  # writings whose text another ask's writing has too (beyond the first)
    near_duplicates: int  # writings equal to another up to case and whitespace, not identical (beyond the first)
    flagged: tuple[Flagged, ...]  # the first LISTED of them
    duplicate_groups: tuple[tuple[str, ...], ...]  # ids of writings with equal or near-equal text, first LISTED groups


def reference_of(writings: Iterable[PoolWriting]) -> dict[str, TokenFigures]:
    """Per format, the token figures of a pool's writings that are not flagged (a reference)."""
    per_format: dict[str, list[int]] = defaultdict(list)
    for writing in writings:
        if flag(writing.text) is None:
            per_format[writing.format].append(writing.n_tokens)
    return {name: TokenFigures.of(counts) for name, counts in sorted(per_format.items())}


def _duplicates(writings: Sequence[PoolWriting]) -> tuple[int, int, list[tuple[str, ...]]]:
    """(exact duplicates, near duplicates, groups of ids sharing a near-duplicate key)."""
    groups: dict[str, list[PoolWriting]] = defaultdict(list)
    for writing in writings:
        groups[normalize_writing(writing.text)].append(writing)
    exact = near = 0
    listed: list[tuple[str, ...]] = []
    for members in groups.values():
        if len(members) < 2:
            continue
        distinct = len({w.text for w in members})
        exact += len(members) - distinct
        near += distinct - 1
        listed.append(tuple(w.id for w in members))
    return exact, near, listed


def quality_report(
    writings: Sequence[PoolWriting],
    pool: str | os.PathLike,
    reference: Mapping[str, TokenFigures],
    reference_name: str,
) -> QualityReport:
    """The quality report of a pool's writings against per-format reference figures."""
    flags = [(w, flag(w.text)) for w in writings]
    flagged = [Flagged(id=w.id, ask=w.ask, kind=f[0], rule=f[1], start=w.text.lstrip()[:120]) for w, f in flags if f]
    per_format: dict[str, list[PoolWriting]] = defaultdict(list)
    for writing in writings:
        per_format[writing.format].append(writing)
    flagged_ids = {f.id for f in flagged}
    formats = tuple(
        FormatQuality(
            format=name,
            tokens=TokenFigures.of([w.n_tokens for w in members]),
            reference=reference.get(name),
            flagged=sum(1 for w in members if w.id in flagged_ids),
        )
        for name, members in sorted(per_format.items())
    )
    exact, near, groups = _duplicates(writings)
    kinds = [f.kind for f in flagged]
    return QualityReport(
        pool=str(pool),
        reference=reference_name,
        writings=len(writings),
        formats=formats,
        empty=kinds.count("empty"),
        refusals=kinds.count("refusal"),
        meta=kinds.count("meta"),
        exact_duplicates=exact,
        near_duplicates=near,
        flagged=tuple(flagged[:LISTED]),
        duplicate_groups=tuple(groups[:LISTED]),
    )


def write_quality_report(
    pool: str | os.PathLike,
    reference: Mapping[str, tuple[int, int, int]],
    reference_name: str,
    *,
    compare: str | os.PathLike | None = None,
) -> QualityReport:
    """Read a pool, write its quality report beside it (atomically) and return it.

    `reference`: per format, (median, p10, p90) tokens that recipes declare; `compare`, a pool
    (e.g. harvested from the official files) whose figures are the reference instead."""
    if compare is not None:
        figures = reference_of(read_pool(compare))
        reference_name = f"pool {compare}"
    else:
        figures = {
            name: TokenFigures(writings=None, median=m, p10=lo, p90=hi) for name, (m, lo, hi) in reference.items()
        }
    report = quality_report(read_pool(pool), pool, figures, reference_name)
    write_text_atomic(quality_report_path(pool), report.model_dump_json(indent=2) + "\n")
    return report


def _figures(figures: TokenFigures | None) -> str:
    return "-" if figures is None else f"{figures.median} ({figures.p10}-{figures.p90})"


def quality_lines(report: QualityReport) -> list[str]:
    """The report as a plain table and a few lines, for a terminal."""
    rows = [("format", "writings", "tokens median (p10-p90)", "reference", "flagged")]
    rows += [
        (q.format, str(q.tokens.writings), _figures(q.tokens), _figures(q.reference), str(q.flagged))
        for q in report.formats
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.append(f"reference: {report.reference}")
    lines.append(
        f"{report.writings:,} writings: {report.empty} empty, {report.refusals} refusals, {report.meta} talking about "
        f"the ask (kept out of needle slots); {report.exact_duplicates} exact and {report.near_duplicates} near "
        f"duplicates; details in {quality_report_path(report.pool)}"
    )
    for item in report.flagged[:5]:
        lines.append(f"{item.kind} ({item.rule}): '{item.ask}': {item.start[:70]!r}")
    if len(report.flagged) > 5 or report.empty + report.refusals + report.meta > 5:
        lines.append(f"... {report.empty + report.refusals + report.meta - 5} more flagged")
    return lines
