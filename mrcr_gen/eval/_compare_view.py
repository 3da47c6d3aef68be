"""Runs side by side as one self-contained page (`mrcr-eval compare --html`): everything the
terminal `compare` prints (the leaderboard with its intervals, the prefix-kept and target shares,
the per-bin means, the within-noise verdict), the overlay plot, each run's warnings, outcome table
and plots, and a paired view of the rows whose outcome or score changed between the first run
and each other run."""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence
from typing import Any

from rich.console import Console

from ._compare import compare_rows, controls_table
from ._floors import declared_floors
from ._items import EvalRecipe
from ._view import (
    ViewReport,
    ViewSample,
    _e,
    _headline_keys,
    _label,
    _outcomes_html,
    _page,
    _plots_html,
    _scroll,
    _warnings_html,
    format_interval,
    format_value,
)

MAX_FLIPS = 500  # rows listed per pair of runs (the count says how many changed)


def _leaderboard_html(entries: list[dict[str, Any]]) -> str:
    columns, rows = compare_rows(entries)
    head = "".join(f"<th>{_e(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{_e(cell)}</td>" for cell in row) + "</tr>" for row in rows)
    return (
        "<section><h2>Runs</h2>"
        + _scroll(f'<table id="leaderboard" class="grid"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>')
        + '<p class="note">In brackets: bootstrap 95% intervals (rows resampled within bin x needle cells); '
        "vs first: the mean's difference from the first run, within noise when the intervals overlap; "
        "target+prefix: the right writing with its prefix (target: with or without).</p></section>"
    )


def _controls_html(entries: list[dict[str, Any]], recipes: Sequence[EvalRecipe]) -> str:
    """The memorization controls' table, as the terminal prints it (when a run is a control)."""
    table = controls_table(entries, declared_floors(recipes))
    if table is None:
        return ""
    console = Console(record=True, width=200, file=io.StringIO())
    console.print(table)
    return f'<section><h2>Memorization controls</h2><pre class="text">{_e(console.export_text())}</pre></section>'


def _headline_table(reports: list[ViewReport]) -> str:
    keys = _headline_keys(r.headline for r in reports)
    head = "".join(f"<th>{_e(r.title)}</th>" for r in reports)
    rows = "".join(
        f"<tr><th>{_e(_label(key))}</th>"
        + "".join(
            f'<td class="num">{_e(format_value(r.headline.get(key), key))}'
            + (f'<span class="stat-ci"> {_e(format_interval(r.intervals[key]))}</span>' if key in r.intervals else "")
            + "</td>"
            for r in reports
        )
        + "</tr>"
        for key in keys
    )
    return (
        "<section><h2>Headline</h2>"
        + _scroll(
            f'<table id="headline-compare" class="grid"><thead><tr><th></th>{head}</tr></thead>'
            + f"<tbody>{rows}</tbody></table>"
        )
        + "</section>"
    )


def _changed(a: ViewSample, b: ViewSample) -> bool:
    return (
        a.outcome != b.outcome
        or (a.score is not None and b.score is not None and abs(a.score - b.score) > 1e-9)
        or ((a.score is None) != (b.score is None))
    )


def flipped_rows(first: ViewReport, other: ViewReport) -> list[tuple[ViewSample, ViewSample]]:
    """The rows of both runs (same file and row) whose outcome or score differs, largest score change first."""
    theirs = {(s.file, s.row): s for s in other.samples}
    pairs = [(s, theirs[(s.file, s.row)]) for s in first.samples if (s.file, s.row) in theirs]
    changed = [(a, b) for a, b in pairs if _changed(a, b)]
    changed.sort(key=lambda p: (-abs((p[1].score or 0.0) - (p[0].score or 0.0)), p[0].file, p[0].row))
    return changed


def _side(sample: ViewSample) -> str:
    return (
        f'<span class="badge o-{_e(sample.outcome)}">{_e(sample.outcome)}</span> '
        f"{_e(format_value(sample.score))} · prefix {_e(sample.prefix or '–')}"
    )


def _flips_html(reports: list[ViewReport]) -> str:
    sections = ""
    for index, other in enumerate(reports[1:], start=1):
        flips = flipped_rows(reports[0], other)
        body = "".join(
            f'<tr><td title="{_e(a.file)}">{_e(a.file.rsplit("/", 1)[-1])}</td><td class="num">{a.row}</td>'
            f'<td>{_e(a.bin)}</td><td class="num">{a.n_needles}</td><td>{_side(a)}</td><td>{_side(b)}</td>'
            f'<td class="num">{_e(format_value((b.score or 0.0) - (a.score or 0.0)))}</td></tr>'
            for a, b in flips[:MAX_FLIPS]
        )
        more = f" (the {MAX_FLIPS} largest score changes shown)" if len(flips) > MAX_FLIPS else ""
        sections += f"<h3>{_e(reports[0].title)} → {_e(other.title)}: {len(flips)} rows changed{_e(more)}</h3>" + (
            _scroll(
                f'<table id="flips-{index}" class="grid flips"><thead><tr><th>File</th><th class="num">Row</th>'
                f'<th>Bin</th><th class="num">Needles</th><th>First run</th><th>This run</th>'
                f'<th class="num">Score change</th></tr></thead><tbody>{body}</tbody></table>'
            )
            if flips
            else '<p class="note">No row changed its outcome or score.</p>'
        )
    return f'<section id="flips"><h2>Rows that changed between runs</h2>{sections}</section>' if sections else ""


def render_compare(
    reports: list[ViewReport],
    entries: list[dict[str, Any]] | None = None,
    overlay: bytes | None = None,
    recipes: Sequence[EvalRecipe] = (),
) -> str:
    """Runs side by side (see the module docstring); `entries` are `compare`'s (the leaderboard
    and the controls' table, against the floors `recipes` declare), `overlay` its plot (PNG).
    Static (no script)."""
    if not reports:
        raise ValueError("render_compare needs at least one report")
    sections = ""
    for i, r in enumerate(reports):
        outcomes = _outcomes_html(r.outcomes, f"outcomes-{i}")
        sections += (
            f'<section class="run"><h2>{_e(r.title)}</h2>{_warnings_html(r.warnings)}'
            + (f"<h3>Outcomes by bin and needle count</h3>{outcomes}" if outcomes else "")
            + f"{_plots_html(r.plots)}</section>"
        )
    overlay_html = (
        '<section class="plots"><h2>Mean score by bin, every run</h2><figure class="plot"><img alt="overlay" '
        f'src="data:image/png;base64,{base64.b64encode(overlay).decode("ascii")}"></figure></section>'
        if overlay
        else ""
    )
    title = "Compare: " + ", ".join(r.title for r in reports)
    warnings = [f"{r.title}: {w}" for r in reports for w in r.warnings]
    body = (
        f"<header><h1>{_e(title)}</h1></header><main>{_warnings_html(warnings)}"
        + (_leaderboard_html(entries) + _controls_html(entries, recipes) if entries else "")
        + _headline_table(reports)
        + overlay_html
        + _flips_html(reports)
        + f'<div class="runs">{sections}</div></main>'
    )
    return _page(title, body)
