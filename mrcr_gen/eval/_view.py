"""A run's report as one self-contained HTML page (`mrcr-eval view`): headline numbers, plots,
the outcome table and a browser of every sample with a word diff of expected answer and reply.

The page loads nothing: CSS and JS are inline, images are data: URIs, and its Content-Security-Policy
forbids every fetch and runs no script but its own (by hash), so it works from file:// and as an
e-mail attachment, and a reply holding HTML can neither run nor load anything. The samples travel as
one JSON blob that the script renders a page at a time; a diff is computed when a sample is opened.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import mimetypes
import os
from collections.abc import Iterable
from importlib import resources
from typing import Any

from pydantic import BaseModel

from .._files import write_text_atomic

# The order the page lists outcomes in (others follow, sorted), with each one's colour in view.css.
OUTCOMES = ("target", "other_needle", "distractor", "not_in_context", "empty", "error", "skipped")
# The headline keys a run usually has, in the order shown, with their labels; other keys follow.
HEADLINE_LABELS = {
    "model": "Model",
    "mean_score": "Mean score",
    "auc_128k": "AUC ≤128k",
    "auc_1m": "AUC ≤1M",
    "mean_128k": "Mean ≤128k",
    "mean_1m": "Mean ≤1M",
    "complete": "Complete",
    "official": "Official",
    "n_rows": "Rows",
    "n_scored": "Scored",
    "errors": "Errors",
    "cost_usd": "Cost (USD)",
}


class ViewSample(BaseModel):
    """One graded row as the page shows it."""

    file: str
    row: int
    bin: str
    bin_upper: int
    n_needles: int
    status: str  # "ok" | "error" | "skipped"
    score: float | None = None
    outcome: str  # one of OUTCOMES
    prefix: str | None = None  # "ok" | "late" | "missing"
    target_ordinal: int | None = None
    returned_ordinal: int | None = None
    returned_index: int | None = None  # message index of the writing the reply matched
    target_depth: float | None = None  # share of the conversation's characters before the target needle
    returned_depth: float | None = None  # the same, before the writing the reply matched
    match_ratio: float | None = None
    truncated: bool = False
    query: str
    expected: str
    reply: str | None = None
    error: str | None = None
    needle_depths: list[float] = []  # every needle's depth, in order (the needle strip)
    context_chars: int | None = None  # characters of the conversation
    prefix_text: str = ""  # the random string / hash the reply must start with
    returned_text: str | None = None  # the writing returned, when another needle or a distractor
    flags: list[str] = []  # what was unusual about the reply: repeated, case_changed, before_prefix
    context_lost: bool = False  # the data file is gone or changed: no conversation, no expected answer


class ViewReport(BaseModel):
    """Everything one run's page shows."""

    title: str
    headline: dict[str, Any] = {}
    plots: dict[str, bytes] = {}  # file name -> image bytes (PNG)
    outcomes: list[dict[str, Any]] = []  # {bin, n_needles, count, shares, prefix, crossed} (`_failures`)
    samples: list[ViewSample] = []
    intervals: dict[str, list[float]] = {}  # headline key -> its bootstrap 95% interval
    bins: list[dict[str, Any]] = []  # {bin, count, mean_score, ci}: each bin's mean with its interval
    warnings: list[str] = []  # rows that lost their context (data file missing or changed)


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def format_value(value: Any, key: str = "") -> str:
    """A value as the page writes it, one format throughout: None is "n/a", a score (any float)
    three decimals ("0.293", "1.000"), a cost in dollars ("$0.0123")."""
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) or (key.endswith("_usd") and isinstance(value, int)):
        if key.endswith("_usd"):
            return f"${value:,.4f}"
        text = f"{value:,.3f}"
        return "0.000" if text == "-0.000" else text
    return str(value)


def format_interval(interval: Any, label: str = "95% CI ") -> str:
    """A bootstrap 95% interval as the page writes it: "95% CI 0.250–0.331"; "" without one."""
    if not isinstance(interval, (list, tuple)) or len(interval) != 2:
        return ""
    return f"{label}{format_value(float(interval[0]))}–{format_value(float(interval[1]))}"


def _headline_keys(headlines: Iterable[dict[str, Any]]) -> list[str]:
    present: list[str] = []
    for headline in headlines:
        present += [key for key in headline if key not in present]
    return [key for key in HEADLINE_LABELS if key in present] + [key for key in present if key not in HEADLINE_LABELS]


def _label(key: str) -> str:
    return HEADLINE_LABELS.get(key, key.replace("_", " "))


def _headline_html(headline: dict[str, Any], intervals: dict[str, list[float]] | None = None) -> str:
    if not headline:
        return ""
    intervals = intervals or {}
    cells = "".join(
        f'<div class="stat"><div class="stat-label">{_e(_label(key))}</div>'
        f'<div class="stat-value" data-key="{_e(key)}">{_e(format_value(headline[key], key))}</div>'
        + (f'<div class="stat-ci">{_e(format_interval(intervals[key]))}</div>' if key in intervals else "")
        + "</div>"
        for key in _headline_keys([headline])
    )
    return f'<section id="headline" class="stats">{cells}</section>'


def _warnings_html(warnings: list[str]) -> str:
    if not warnings:
        return ""
    items = "".join(f"<li>{_e(w)}</li>" for w in warnings)
    return (
        '<section id="warnings" class="banner" role="alert"><strong>Data changed or missing</strong>'
        f"<ul>{items}</ul></section>"
    )


def _scroll(table: str) -> str:
    """A table in a box of its own that scrolls sideways on a narrow screen (the page never does)."""
    return f'<div class="scroll">{table}</div>' if table else ""


def _bins_html(bins: list[dict[str, Any]]) -> str:
    if not bins:
        return ""
    body = "".join(
        f'<tr><td>{_e(b.get("bin", ""))}</td><td class="num">{_e(format_value(b.get("count")))}</td>'
        f'<td class="num">{_e(format_value(b.get("mean_score")))}</td>'
        f'<td class="num ci">{_e(format_interval(b.get("ci"), ""))}</td></tr>'
        for b in bins
    )
    return (
        '<section><h2>Mean score by bin</h2><p class="note">Errors and skipped rows count 0; the interval is a '
        "bootstrap 95% interval (rows resampled within each bin x needle cell, seeded).</p>"
        + _scroll(
            '<table id="bins" class="grid"><thead><tr><th>Bin</th><th class="num">Rows</th>'
            f'<th class="num">Mean</th><th class="num">95% CI</th></tr></thead><tbody>{body}</tbody></table>'
        )
        + "</section>"
    )


def _image_type(name: str) -> str:
    kind = mimetypes.guess_type(name)[0]
    return kind if kind and kind.startswith("image/") else "image/png"


def _plots_html(plots: dict[str, bytes]) -> str:
    if not plots:
        return ""
    figures = "".join(
        f'<figure class="plot"><img alt="{_e(name)}" src="data:{_image_type(name)};base64,'
        f'{base64.b64encode(data).decode("ascii")}"><figcaption>{_e(name)}</figcaption></figure>'
        for name, data in plots.items()
    )
    return f'<section class="plots"><h2>Plots</h2><div class="plot-grid">{figures}</div></section>'


def _outcome_names(rows: list[dict[str, Any]]) -> list[str]:
    seen = {name for row in rows for name in (row.get("shares") or {})}
    return [name for name in OUTCOMES if name in seen] + sorted(seen.difference(OUTCOMES))


def _percent(share: float) -> str:
    return f"{100 * share:.1f}%"


def _share_cell(outcome: str, share: Any, note: str = "", tint: float | None = None) -> str:
    if share is None:
        return '<td class="num">–</td>'
    share = float(share)
    alpha = min(max(share if tint is None else tint, 0.0), 1.0)
    # The cell's tint grows with the share, in the outcome's colour (--a is the alpha view.css uses).
    return (
        f'<td class="num share o-{_e(outcome)}" style="--a:{alpha:.3f}">{_e(_percent(share))}'
        + (f'<span class="sub">{_e(note)}</span>' if note else "")
        + "</td>"
    )


def _crossed(row: dict[str, Any], outcome: str, state: str) -> int:
    return int(((row.get("crossed") or {}).get(outcome) or {}).get(state, 0))


def _outcome_cells(row: dict[str, Any], names: list[str]) -> str:
    """A row's outcome shares; the target's split by its prefix (tinted by the part that kept it:
    a right writing without its prefix scores 0) and the share of replies that kept the prefix."""
    count = int(row.get("count") or 0)
    shares = row.get("shares") or {}
    cells = []
    for name in names:
        if name == "target" and count and row.get("crossed") is not None:
            kept = _crossed(row, "target", "ok") / count
            cells.append(_share_cell(name, shares.get(name), f"{_percent(kept)} with prefix", kept))
        else:
            cells.append(_share_cell(name, shares.get(name)))
    prefix = row.get("prefix")
    kept_cell = (
        f'<td class="num prefix-kept">{_e(_percent(prefix.get("ok", 0) / count))}</td>'
        if isinstance(prefix, dict) and count
        else '<td class="num">–</td>'
    )
    return kept_cell + "".join(cells)


def _outcomes_html(rows: list[dict[str, Any]], table_id: str = "outcomes") -> str:
    if not rows:
        return ""
    names = _outcome_names(rows)
    head = "".join(f'<th class="num"><span class="badge o-{_e(n)}">{_e(n)}</span></th>' for n in names)
    body = "".join(
        "<tr>"
        f"<td>{_e(row.get('bin', ''))}</td>"
        f'<td class="num">{_e(format_value(row.get("n_needles")))}</td>'
        f'<td class="num">{_e(format_value(row.get("count")))}</td>' + _outcome_cells(row, names) + "</tr>"
        for row in rows
    )
    return _scroll(
        f'<table id="{_e(table_id)}" class="grid"><thead><tr><th>Bin</th><th class="num">Needles</th>'
        f'<th class="num">Rows</th><th class="num">Prefix kept</th>{head}</tr></thead><tbody>{body}</tbody></table>'
    )


def samples_json(samples: list[ViewSample]) -> str:
    """The samples as JSON safe inside a <script> element: every "<" is written \\u003c (as are ">"
    and "&"), so no text a reply holds ("</script>", "<!--") can end the element early. A NaN or
    infinite number is written null: JSON.parse would reject the whole blob otherwise."""
    text = "[" + ",".join(s.model_dump_json() for s in samples) + "]"
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _script_hash(script: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")


def _page(title: str, body: str, script: str | None = None) -> str:
    # No fetch of any kind (default-src 'none'); images only from data: URIs; the one script is ours.
    script_src = f"'{_script_hash(script)}'" if script is not None else "'none'"
    policy = f"default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src {script_src}"
    script_html = f"<script>{script}</script>" if script is not None else ""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_e(policy)}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{_asset('view.css')}</style></head>"
        f"<body>{body}{script_html}</body></html>\n"
    )


def render_view(report: ViewReport) -> str:
    """One run's report as one self-contained HTML document."""
    outcomes = _outcomes_html(report.outcomes)
    body = "".join(
        [
            f"<header><h1>{_e(report.title)}</h1></header><main>",
            _warnings_html(report.warnings),
            _headline_html(report.headline, report.intervals),
            _bins_html(report.bins),
            f"<section><h2>Outcomes by bin and needle count</h2>{OUTCOMES_NOTE}{outcomes}</section>"
            if outcomes
            else "",
            _plots_html(report.plots),
            _asset("view_browser.html"),
            f'<script type="application/json" id="samples-data">{samples_json(report.samples)}</script>',
            f'<script type="application/json" id="outcome-order">{json.dumps(list(OUTCOMES))}</script></main>',
        ]
    )
    return _page(report.title, body, _asset("view.js"))


OUTCOMES_NOTE = (
    '<p class="note">Share of rows by what the reply returned. Prefix kept: replies that start with their '
    "random string (a reply without it scores 0, right writing or not); the target cell is tinted by the "
    "share that returned the target WITH its prefix.</p>"
)


def write_html(text: str, path: str | os.PathLike) -> None:
    """Write a page atomically: a reader never sees half of it."""
    write_text_atomic(path, text)
