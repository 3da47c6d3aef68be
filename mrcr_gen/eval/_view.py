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


class ViewReport(BaseModel):
    """Everything one run's page shows."""

    title: str
    headline: dict[str, Any] = {}
    plots: dict[str, bytes] = {}  # file name -> image bytes (PNG)
    outcomes: list[dict[str, Any]] = []  # {bin, n_needles, count, shares: {outcome: share}}
    samples: list[ViewSample] = []


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def format_value(value: Any) -> str:
    """A headline value as text: None is "n/a", a float keeps four decimals at most."""
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        text = f"{value:,.4f}".rstrip("0").rstrip(".")
        return text if text not in ("", "-0") else "0"
    return str(value)


def _headline_keys(headlines: Iterable[dict[str, Any]]) -> list[str]:
    present: list[str] = []
    for headline in headlines:
        present += [key for key in headline if key not in present]
    return [key for key in HEADLINE_LABELS if key in present] + [key for key in present if key not in HEADLINE_LABELS]


def _label(key: str) -> str:
    return HEADLINE_LABELS.get(key, key.replace("_", " "))


def _headline_html(headline: dict[str, Any]) -> str:
    if not headline:
        return ""
    cells = "".join(
        f'<div class="stat"><div class="stat-label">{_e(_label(key))}</div>'
        f'<div class="stat-value" data-key="{_e(key)}">{_e(format_value(headline[key]))}</div></div>'
        for key in _headline_keys([headline])
    )
    return f'<section id="headline" class="stats">{cells}</section>'


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


def _share_cell(outcome: str, share: Any) -> str:
    if share is None:
        return '<td class="num">–</td>'
    share = float(share)
    # The cell's tint grows with the share, in the outcome's colour (--a is the alpha view.css uses).
    return (
        f'<td class="num share o-{_e(outcome)}" style="--a:{min(max(share, 0.0), 1.0):.3f}">'
        f"{_e(format_value(round(100 * share, 1)))}%</td>"
    )


def _outcomes_html(rows: list[dict[str, Any]], table_id: str = "outcomes") -> str:
    if not rows:
        return ""
    names = _outcome_names(rows)
    head = "".join(f'<th class="num"><span class="badge o-{_e(n)}">{_e(n)}</span></th>' for n in names)
    body = "".join(
        "<tr>"
        f"<td>{_e(row.get('bin', ''))}</td>"
        f'<td class="num">{_e(format_value(row.get("n_needles")))}</td>'
        f'<td class="num">{_e(format_value(row.get("count")))}</td>'
        + "".join(_share_cell(n, (row.get("shares") or {}).get(n)) for n in names)
        + "</tr>"
        for row in rows
    )
    return (
        f'<table id="{_e(table_id)}" class="grid"><thead><tr><th>Bin</th><th class="num">Needles</th>'
        f'<th class="num">Rows</th>{head}</tr></thead><tbody>{body}</tbody></table>'
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


def _browser_html() -> str:
    return """<section class="browser"><h2>Samples</h2>
<noscript><p class="note">The sample browser needs JavaScript; the numbers above do not.</p></noscript>
<form id="filters" class="filters">
<label>Bin <select id="f-bin"><option value="">all</option></select></label>
<label>Needles <select id="f-needles"><option value="">all</option></select></label>
<label>Outcome <select id="f-outcome"><option value="">all</option></select></label>
<label>Score ≥ <input id="f-min" type="number" step="any" inputmode="decimal" size="5"></label>
<label>Score ≤ <input id="f-max" type="number" step="any" inputmode="decimal" size="5"></label>
<label>Sort <select id="f-sort">
<option value="file">file, row</option><option value="score-asc">score ↑</option>
<option value="score-desc">score ↓</option></select></label>
<button type="button" id="f-reset">Reset</button>
</form>
<div class="pager"><span id="count"></span>
<span class="pager-buttons"><button type="button" id="prev">‹ Previous</button>
<span id="page"></span><button type="button" id="next">Next ›</button></span></div>
<table id="samples" class="grid samples"><thead><tr><th>File</th><th class="num">Row</th><th>Bin</th>
<th class="num">Needles</th><th>Outcome</th><th class="num">Score</th><th>Prefix</th><th>Status</th></tr></thead>
<tbody></tbody></table>
</section>
<div id="detail" class="detail" hidden role="dialog" aria-modal="true" aria-labelledby="d-title">
<div class="detail-box"><div class="detail-head"><h2 id="d-title"></h2>
<span class="detail-nav"><button type="button" id="d-prev">‹</button><button type="button" id="d-next">›</button>
<button type="button" id="d-close" aria-label="Close">✕</button></span></div>
<dl id="d-facts" class="facts"></dl>
<div id="d-error" class="error-text" hidden></div>
<h3>Final query</h3><pre id="d-query" class="text"></pre>
<div class="legend"><del>removed from the expected answer</del> <ins>added by the reply</ins>
<span id="d-diffnote"></span></div>
<div class="sides"><div><h3>Expected</h3><pre id="d-expected" class="text"></pre></div>
<div><h3>Reply</h3><pre id="d-reply" class="text"></pre></div></div>
</div></div>"""


def render_view(report: ViewReport) -> str:
    """One run's report as one self-contained HTML document."""
    outcomes = _outcomes_html(report.outcomes)
    body = "".join(
        [
            f"<header><h1>{_e(report.title)}</h1></header><main>",
            _headline_html(report.headline),
            _plots_html(report.plots),
            f"<section><h2>Outcomes by bin and needle count</h2>{outcomes}</section>" if outcomes else "",
            _browser_html(),
            f'<script type="application/json" id="samples-data">{samples_json(report.samples)}</script>',
            f'<script type="application/json" id="outcome-order">{json.dumps(list(OUTCOMES))}</script></main>',
        ]
    )
    return _page(report.title, body, _asset("view.js"))


def render_compare(reports: list[ViewReport]) -> str:
    """Runs side by side: one headline table with a column per run, then each run's outcome
    table and plots. Static (no script)."""
    if not reports:
        raise ValueError("render_compare needs at least one report")
    keys = _headline_keys(r.headline for r in reports)
    head = "".join(f"<th>{_e(r.title)}</th>" for r in reports)
    rows = "".join(
        f"<tr><th>{_e(_label(key))}</th>"
        + "".join(f'<td class="num">{_e(format_value(r.headline.get(key)))}</td>' for r in reports)
        + "</tr>"
        for key in keys
    )
    sections = ""
    for i, r in enumerate(reports):
        outcomes = _outcomes_html(r.outcomes, f"outcomes-{i}")
        sections += (
            f'<section class="run"><h2>{_e(r.title)}</h2>'
            + (f"<h3>Outcomes by bin and needle count</h3>{outcomes}" if outcomes else "")
            + f"{_plots_html(r.plots)}</section>"
        )
    title = "Compare: " + ", ".join(r.title for r in reports)
    body = (
        f"<header><h1>{_e(title)}</h1></header><main><section><h2>Headline</h2>"
        f'<table id="headline-compare" class="grid"><thead><tr><th></th>{head}</tr></thead>'
        f'<tbody>{rows}</tbody></table></section><div class="runs">{sections}</div></main>'
    )
    return _page(title, body)


def write_html(text: str, path: str | os.PathLike) -> None:
    """Write a page atomically: a reader never sees half of it."""
    write_text_atomic(path, text)
