"""The HTML report of a run (`mrcr_gen.eval._view`): a self-contained page, checked as a string and
in a real headless Chromium (playwright driving the system's /usr/bin/chromium; it never downloads
a browser). The browser tests skip where chromium or playwright is missing, unless
MRCR_REQUIRE_BROWSER=1 (set by .ci/run), where they fail instead.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from mrcr_gen.eval._compare_view import render_compare
from mrcr_gen.eval._view import (
    OUTCOMES,
    ViewReport,
    ViewSample,
    render_view,
    samples_json,
    write_html,
)

ROOT = Path(__file__).resolve().parents[2]
BINS = [("(4096, 8192]", 8192), ("(8192, 16384]", 16384), ("(16384, 32768]", 32768)]
# A 1x1 PNG: the page must embed the bytes it is given, whatever they draw.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000d49444154789c63f8cfc0f01f0005000201a5d4f1e40000000049454e44ae426082"
)
HOSTILE_REPLY = '<img src=x onerror="window.__pwned=1">ok </script><script>window.__pwned=2</script> <!-- x'
HOSTILE_EXPECTED = "<script>window.__pwned=3</script> & done"
HOSTILE_FILE = "<svg onload=window.__pwned=4>.parquet"


def sample(i: int, **changes) -> ViewSample:
    """Sample i of a varied run: every outcome, three bins, three needle counts, scores in [0, 1]."""
    outcome = OUTCOMES[i % len(OUTCOMES)]
    status = outcome if outcome in ("error", "skipped") else "ok"
    label, upper = BINS[i % len(BINS)]
    fields = {
        "file": f"run-{i % 4}.parquet",
        "row": i,
        "bin": label,
        "bin_upper": upper,
        "n_needles": (2, 4, 8)[(i // 3) % 3],
        "status": status,
        "score": round((i * 37 % 101) / 100, 2) if status == "ok" else None,
        "outcome": outcome,
        "prefix": ("ok", "late", "missing")[i % 3] if status == "ok" else None,
        "target_ordinal": 1 + i % 4,
        "returned_ordinal": 1 + (i + 1) % 4 if status == "ok" else None,
        "returned_index": 2 * i + 1 if status == "ok" else None,
        "target_depth": (i % 10) / 10,
        "match_ratio": 0.5 if status == "ok" else None,
        "truncated": i % 5 == 0,
        "query": f"Prepend abc{i} to the {1 + i % 4}th poem about tea.",
        "expected": f"abc{i} a poem about tea number {i}",
        "reply": f"abc{i} a poem about coffee number {i}" if status == "ok" else None,
        "error": "HTTP 500 from the server" if status == "error" else None,
    }
    return ViewSample(**{**fields, **changes})


def report(samples: list[ViewSample], **changes) -> ViewReport:
    fields = {
        "title": "gpt-test on small",
        "headline": {"model": "gpt-test", "mean_score": 0.53125, "auc_128k": None, "n_rows": len(samples)},
        "plots": {"plot.png": PNG},
        "outcomes": [
            {"bin": label, "n_needles": 2, "count": 10, "shares": {"target": 0.7, "other_needle": 0.2, "empty": 0.1}}
            for label, _ in BINS
        ],
        "samples": samples,
    }
    return ViewReport(**{**fields, **changes})


def blob(page: str) -> list[dict]:
    match = re.search(r'<script type="application/json" id="samples-data">(.*?)</script>', page, re.S)
    assert match, "no samples blob"
    return json.loads(match.group(1))


HOSTILE = [
    sample(0),
    sample(1, reply=HOSTILE_REPLY, expected=HOSTILE_EXPECTED, file=HOSTILE_FILE, query="<b>bold?</b>"),
    sample(2, reply="line one\u2028line two</SCRIPT >", expected="¿Qué? 🍵 \"quoted\" 'single' \\ back", error="<i>"),
    sample(5, expected="<b>unanswered</b> <img src=z onerror=window.__pwned=6>", file="<u>no-reply</u>.parquet"),
]


# -- the page as a string ---------------------------------------------------------------------------


def test_page_loads_nothing_from_outside():
    page = render_view(report(HOSTILE))
    assert not re.search(r"""\b(src|href|action|poster|srcset)\s*=\s*["']?\s*(https?:|//|file:)""", page, re.I)
    assert "<link" not in page.lower()
    assert "@import" not in page
    assert not re.search(r"url\(", page)
    assert '<img alt="plot.png" src="data:image/png;base64,' in page
    # One executable script, allowed by its hash alone: nothing injected could run beside it.
    scripts = re.findall(r"<script(?: [^>]*)?>", page)
    assert [s for s in scripts if "application/json" not in s] == ["<script>"]
    policy = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)"', page).group(1)
    assert "default-src 'none'" in html.unescape(policy)
    assert re.search(r"script-src 'sha256-[A-Za-z0-9+/]+=*'", html.unescape(policy))


def test_script_hash_in_the_policy_is_the_scripts():
    import base64
    import hashlib

    page = render_view(report([sample(0)]))
    script = re.search(r"<script>(.*?)</script>", page, re.S).group(1)
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    assert f"'sha256-{digest}'" in html.unescape(page)


def test_samples_blob_round_trips_every_sample():
    samples = [sample(i) for i in range(40)] + HOSTILE
    assert blob(render_view(report(samples))) == [s.model_dump(mode="json") for s in samples]


def test_hostile_text_cannot_leave_its_element():
    page = render_view(report(HOSTILE, title="<b>run</b> & co"))
    for raw in (HOSTILE_REPLY, HOSTILE_EXPECTED, HOSTILE_FILE, "<img src=x", "</script><script>", "<svg", "<!--"):
        assert raw not in page
    assert page.count("</script>") == 3  # the two JSON blobs and the one script end only where they should
    assert "</SCRIPT" not in page.upper().replace("</SCRIPT>", "", 3)
    assert "<title>&lt;b&gt;run&lt;/b&gt; &amp; co</title>" in page
    assert "<h1>&lt;b&gt;run&lt;/b&gt; &amp; co</h1>" in page


def test_blob_writes_nan_and_infinity_as_null():
    text = samples_json([sample(0, score=float("nan"), match_ratio=float("inf"), target_depth=float("-inf"))])
    parsed = json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} in the blob"))
    assert (parsed[0]["score"], parsed[0]["match_ratio"], parsed[0]["target_depth"]) == (None, None, None)


def test_blob_escapes_every_angle_bracket_and_ampersand():
    text = samples_json(HOSTILE)
    assert not set("<>&") & set(text)
    assert json.loads(text)[1]["reply"] == HOSTILE_REPLY


def test_headline_shows_present_keys_in_order_and_none_as_na():
    page = render_view(report([], headline={"cost_usd": 1.5, "zeta": 3, "model": "m", "auc_1m": None,
                                            "complete": True, "mean_score": 0.123456}))
    shown = re.findall(r'data-key="([^"]+)">([^<]*)<', page)
    # One number format: scores with three decimals, costs in dollars.
    assert shown == [("model", "m"), ("mean_score", "0.123"), ("auc_1m", "n/a"), ("complete", "yes"),
                     ("cost_usd", "$1.5000"), ("zeta", "3")]
    assert "AUC ≤1M" in page and "auc_128k" not in page


def test_outcome_table_lists_shares_in_the_outcome_order():
    rows = [{"bin": "(0, 8192]", "n_needles": 4, "count": 8,
             "shares": {"weird": 0.5, "empty": 0.125, "target": 0.375}}]
    page = render_view(report([], outcomes=rows))
    table = re.search(r'<table id="outcomes".*?</table>', page, re.S).group(0)
    assert re.findall(r'<span class="badge o-([^"]+)">', table) == ["target", "empty", "weird"]
    cells = re.findall(r">([^<>]*)</td>", table)
    assert cells == ["(0, 8192]", "4", "8", "–", "37.5%", "12.5%", "50.0%"]  # no prefix counts: "–"


def test_compare_puts_runs_side_by_side():
    first = report([sample(0)], title="run A", headline={"model": "a", "mean_score": 0.5})
    second = report([sample(1)], title="run B", headline={"model": "b", "auc_1m": 0.25}, plots={})
    page = render_compare([first, second])
    table = re.search(r'<table id="headline-compare".*?</table>', page, re.S).group(0)
    assert re.findall(r"<th>([^<]*)</th>", table) == ["", "run A", "run B", "Model", "Mean score", "AUC ≤1M"]
    assert re.findall(r'<td class="num">([^<]*)</td>', table) == ["a", "b", "0.500", "n/a", "n/a", "0.250"]
    assert 'id="outcomes-0"' in page and 'id="outcomes-1"' in page
    assert page.count("data:image/png;base64,") == 1
    assert "<script" not in page and "script-src 'none'" in html.unescape(page)
    with pytest.raises(ValueError):
        render_compare([])


def test_write_html_writes_the_whole_page_and_no_partial(tmp_path):
    target = tmp_path / "out" / "report.html"
    page = render_view(report(HOSTILE))
    write_html(page, target)
    assert target.read_text(encoding="utf-8") == page
    assert [p.name for p in target.parent.iterdir()] == ["report.html"]


@pytest.mark.slow
def test_page_assets_ship_inside_the_built_wheel(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
                   check=True, capture_output=True)
    with zipfile.ZipFile(next(tmp_path.glob("mrcr_gen-*.whl"))) as archive:
        names = set(archive.namelist())
    assert {"mrcr_gen/eval/_view.py", "mrcr_gen/eval/view.js", "mrcr_gen/eval/view.css",
            "mrcr_gen/eval/view_browser.html"} <= names


# -- the page in a real browser ---------------------------------------------------------------------


@pytest.fixture
def open_page(browser, tmp_path):
    """Write a report to tmp_path, load it from file:// and return the page (and its console errors)."""
    pages = []

    def load(view: ViewReport):
        path = tmp_path / f"report-{len(pages)}.html"
        write_html(render_view(view), path)
        page = browser.new_page()
        page.errors = []
        page.on("pageerror", lambda error: page.errors.append(str(error)))
        page.goto(path.as_uri())
        page.wait_for_selector("#samples tbody tr, #count[data-total='0']", state="attached")
        pages.append(page)
        return page

    yield load
    for page in pages:
        page.close()


def table_rows(page) -> list[dict]:
    return page.eval_on_selector_all(
        "#samples tbody tr",
        """rows => rows.map(r => ({
            file: r.querySelector('.file').textContent, row: Number(r.querySelector('.row').textContent),
            outcome: r.querySelector('.outcome').dataset.outcome, score: r.querySelector('.score').textContent,
            needles: Number(r.querySelector('.needles').textContent), bin: r.querySelector('.bin').textContent}))""",
    )


def all_pages(page) -> list[dict]:
    rows = table_rows(page)
    while page.is_enabled("#next"):
        page.click("#next")
        rows += table_rows(page)
    return rows


def test_browser_table_shows_every_sample_across_pages(open_page):
    samples = [sample(i) for i in range(250)]
    page = open_page(report(samples))
    assert page.get_attribute("#count", "data-shown") == "250"
    assert page.text_content("#count") == "250 samples"
    assert len(table_rows(page)) == 100
    assert page.text_content("#page") == "page 1 of 3"
    rows = all_pages(page)
    assert sorted((r["file"], r["row"]) for r in rows) == sorted((s.file, s.row) for s in samples)
    assert rows == sorted(rows, key=lambda r: (r["file"], r["row"]))  # file, row order by default
    assert page.errors == []


def test_browser_filters_narrow_the_table(open_page):
    samples = [sample(i) for i in range(250)]
    page = open_page(report(samples))
    page.select_option("#f-outcome", "other_needle")
    wanted = sorted((s.file, s.row) for s in samples if s.outcome == "other_needle")
    rows = all_pages(page)
    assert sorted((r["file"], r["row"]) for r in rows) == wanted
    assert {r["outcome"] for r in rows} == {"other_needle"}
    assert page.get_attribute("#count", "data-shown") == str(len(wanted))

    page.select_option("#f-outcome", "")
    page.select_option("#f-bin", BINS[1][0])
    page.select_option("#f-needles", "4")
    page.fill("#f-min", "0.3")
    page.fill("#f-max", "0.6")
    wanted = sorted(
        (s.file, s.row) for s in samples
        if s.bin == BINS[1][0] and s.n_needles == 4 and s.score is not None and 0.3 <= s.score <= 0.6
    )
    assert wanted  # the filter has something to keep
    assert sorted((r["file"], r["row"]) for r in all_pages(page)) == wanted

    page.click("#f-reset")
    assert page.get_attribute("#count", "data-shown") == "250"


def test_browser_sorts_by_score(open_page):
    samples = [sample(i) for i in range(250)]
    page = open_page(report(samples))
    scored = sorted(s.score for s in samples if s.score is not None)
    for direction, expected in (("score-asc", scored), ("score-desc", scored[::-1])):
        page.select_option("#f-sort", direction)
        shown = [r["score"] for r in all_pages(page)]
        assert [float(s) for s in shown[: len(scored)]] == expected
        assert set(shown[len(scored):]) == {"n/a"}  # unscored samples last either way


def test_browser_detail_highlights_the_changed_words(open_page):
    target = sample(0, expected="the quick brown fox jumps over the lazy dog",
                    reply="the quick red fox jumps over the lazy dog today", outcome="other_needle",
                    returned_index=7, target_depth=0.25, match_ratio=0.875, query="Prepend xyz to the 2nd poem.")
    page = open_page(report([target, sample(1), sample(2)]))
    page.click("#samples tbody tr >> nth=0")
    assert page.is_visible("#detail")
    assert page.eval_on_selector_all("#d-expected del", "els => els.map(e => e.textContent)") == ["brown"]
    assert page.eval_on_selector_all("#d-reply ins", "els => els.map(e => e.textContent)") == ["red", "today"]
    assert page.text_content("#d-expected") == target.expected
    assert page.text_content("#d-reply") == target.reply
    assert page.text_content("#d-query") == target.query
    facts = dict(zip(page.eval_on_selector_all("#d-facts dt", "e => e.map(x => x.textContent)"),
                     page.eval_on_selector_all("#d-facts dd", "e => e.map(x => x.textContent)"), strict=True))
    assert facts["Outcome"] == "other_needle" and facts["Returned index"] == "7"
    assert facts["Target depth"] == "25.0%" and facts["Match"] == "0.875" and facts["Truncated"] == "yes"
    assert facts["File"] == target.file and facts["Row"] == "0" and facts["Prefix"] == "ok"
    page.keyboard.press("Escape")
    assert page.is_hidden("#detail")
    assert page.errors == []


def test_browser_hostile_text_shows_as_text_and_never_runs(open_page):
    page = open_page(report(HOSTILE, title="<img src=y onerror=window.__pwned=5>"))
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    row = page.locator("#samples tbody tr", has_text="svg onload")
    assert row.locator(".file").text_content() == HOSTILE_FILE
    row.click()
    assert page.text_content("#d-reply") == HOSTILE_REPLY
    assert page.text_content("#d-expected") == HOSTILE_EXPECTED
    assert page.text_content("#d-query") == "<b>bold?</b>"
    assert page.locator("#detail img, #detail svg, #detail script, #detail b").count() == 0
    page.keyboard.press("Escape")
    # The file column shows the file's name (after its last "/"), the whole path in its tooltip.
    page.locator('#samples td.file[title="<u>no-reply</u>.parquet"]').click()  # an error: nothing to diff
    assert page.is_hidden("#d-diffbox") and page.is_hidden("#d-returned-box")
    assert page.text_content("#d-error") == HOSTILE[3].error
    assert page.text_content("#d-summary").startswith("Error: the request failed")
    facts = page.eval_on_selector_all("#d-facts dt", "e => e.map(x => x.textContent)")
    assert "Truncated" not in facts and "Score" not in facts  # what applies to an error only
    assert page.locator("#detail img, #detail b, #detail u").count() == 0
    assert page.text_content("h1") == "<img src=y onerror=window.__pwned=5>"
    assert page.locator("img").count() == 1  # the plot alone
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert dialogs == [] and page.errors == []


def test_browser_fetches_nothing_but_the_file(browser, tmp_path):
    path = tmp_path / "report.html"
    write_html(render_view(report(HOSTILE)), path)
    page = browser.new_page()
    requested = []
    page.on("request", lambda request: requested.append(request.url))
    page.goto(path.as_uri())
    page.click("#samples tbody tr >> nth=1")
    page.wait_for_selector("#detail:not([hidden])")
    page.close()
    assert [url for url in requested if not url.startswith(("file:", "data:"))] == []
    assert requested[0] == path.as_uri()


def test_browser_loads_2400_long_samples(open_page):
    words = ["tea", "kettle", "leaf", "steep", "pour", "cup", "warm", "green", "black", "oolong"]

    def text(seed: int, n: int = 700) -> str:  # ~4-5 KB of words
        return " ".join(words[(seed * 7 + k * k) % len(words)] for k in range(n))

    samples = [sample(i, expected=text(i), reply=text(i + (i % 3))) for i in range(2400)]
    page = open_page(report(samples))
    assert page.get_attribute("#count", "data-shown") == "2400"
    assert len(table_rows(page)) == 100
    assert page.text_content("#page") == "page 1 of 24"
    page.click('#samples tbody tr[data-index="4"]')  # on page 1; its reply differs from its expected answer
    assert page.locator("#d-expected del").count() > 0 and page.locator("#d-reply ins").count() > 0
    assert page.text_content("#d-reply") == samples[4].reply
    assert page.errors == []


def test_browser_diff_too_long_shows_both_texts_unmarked(open_page):
    expected = " ".join(f"e{k}" for k in range(3500))
    reply = " ".join(f"r{k}" for k in range(3500))  # 3,501 x 3,501 cells: above the diff's limit
    page = open_page(report([sample(0, expected=expected, reply=reply)]))
    page.click("#samples tbody tr >> nth=0")
    assert page.text_content("#d-expected") == expected and page.text_content("#d-reply") == reply
    assert page.locator("#d-expected del, #d-expected ins, #d-reply del, #d-reply ins").count() == 0
    assert "too long for a word diff" in page.text_content("#d-diffnote")
    assert page.errors == []


def test_browser_compare_page_shows_every_run_and_fetches_nothing(browser, tmp_path):
    runs = [report([sample(0)], title=f"run {name}", headline={"model": name, "mean_score": score})
            for name, score in (("a", 0.5), ("<b>b</b>", None))]
    path = tmp_path / "compare.html"
    write_html(render_compare(runs), path)
    page = browser.new_page()
    requested = []
    page.on("request", lambda request: requested.append(request.url))
    page.goto(path.as_uri())
    header = page.eval_on_selector_all("#headline-compare thead th", "e => e.map(x => x.textContent)")
    cells = page.eval_on_selector_all("#headline-compare tbody td", "e => e.map(x => x.textContent)")
    assert header == ["", "run a", "run <b>b</b>"] and cells == ["a", "<b>b</b>", "0.500", "n/a"]
    assert page.locator("section.run").count() == 2 and page.locator("section.run img").count() == 2
    assert page.evaluate("Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)")
    page.close()
    assert [url for url in requested if not url.startswith(("file:", "data:"))] == []


# -- issue 35: phone width, needle strip, search, filters, deep links, warnings ------------------------


def test_warnings_show_as_a_banner_and_intervals_beside_their_numbers():
    page = render_view(report([sample(0)], warnings=["data file /x/a.parquet is missing: rows 1, 2 show without"],
                              intervals={"mean_score": [0.25, 0.75]},
                              bins=[{"bin": BINS[0][0], "count": 3, "mean_score": 0.5, "ci": [0.25, 0.75]}]))
    banner = re.search(r'<section id="warnings".*?</section>', page, re.S).group(0)
    assert "/x/a.parquet is missing: rows 1, 2" in banner
    assert "95% CI 0.250–0.750" in page and re.search(r'<table id="bins".*?0\.500.*?0\.250–0\.750', page, re.S)
    assert 'id="warnings"' not in render_view(report([sample(0)]))


def test_outcome_table_splits_the_target_by_its_prefix():
    rows = [{"bin": BINS[0][0], "n_needles": 2, "count": 4, "shares": {"target": 1.0},
             "prefix": {"ok": 1, "late": 1, "missing": 2, "none": 0},
             "crossed": {"target": {"ok": 1, "late": 1, "missing": 2, "none": 0}}}]
    table = re.search(r'<table id="outcomes".*?</table>', render_view(report([], outcomes=rows)), re.S).group(0)
    assert ">25.0%</td>" in table  # prefix kept
    assert "100.0%<span class=\"sub\">25.0% with prefix</span>" in table and "--a:0.250" in table


def phone_page(browser, path: Path):
    page = browser.new_page()
    page.set_viewport_size({"width": 420, "height": 860})
    page.errors = []
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    page.goto(path.as_uri())
    return page


def test_browser_fits_a_phone_and_keeps_file_names(browser, tmp_path):
    long_dir = "/data/" + "a-very-long-directory-name/" * 4
    samples = [sample(i, file=long_dir + f"mrcr_v2_8needle_in_(65536,131072)-{i % 4}.parquet") for i in range(40)]
    wide = report(samples, outcomes=[
        {"bin": label, "n_needles": n, "count": 10, "shares": {o: 1 / len(OUTCOMES) for o in OUTCOMES},
         "prefix": {"ok": 5, "late": 2, "missing": 3, "none": 0}}
        for label, _ in BINS for n in (2, 4, 8)
    ], warnings=["data file " + long_dir + "x.parquet is missing: rows 1, 2"])
    view_path, compare_path = tmp_path / "view.html", tmp_path / "compare.html"
    write_html(render_view(wide), view_path)
    write_html(render_compare([wide, wide]), compare_path)
    for path in (view_path, compare_path):
        page = phone_page(browser, path)
        assert page.evaluate("document.documentElement.scrollWidth") <= 420, path.name  # no page-level scroll
        if path == view_path:
            names = page.eval_on_selector_all("#samples td.file", "e => e.map(x => [x.textContent, x.title])")
            assert all(text == title.rsplit("/", 1)[-1] and text.endswith(".parquet") for text, title in names)
            page.click("#samples tbody tr >> nth=0")
            assert page.evaluate("document.documentElement.scrollWidth") <= 420
            box = page.eval_on_selector("#d-facts", "e => e.getBoundingClientRect().top")
            assert box > page.eval_on_selector("#d-reply", "e => e.getBoundingClientRect().top")  # reply first
        assert page.errors == []
        page.close()


def test_browser_needle_strip_marks_the_asked_and_returned_needles(open_page):
    s = sample(1, outcome="other_needle", needle_depths=[0.1, 0.5, 0.9], target_ordinal=2, returned_ordinal=3,
               returned_text="the third needle's writing", prefix_text="abc1", prefix="ok",
               expected="abc1 the second needle", reply="abc1 the third needle's writing")
    page = open_page(report([s]))
    page.click("#samples tbody tr >> nth=0")
    marks = page.eval_on_selector_all("#d-strip .needle", "e => e.map(x => [x.textContent, x.className, x.style.left])")
    assert marks == [["1", "needle", "10%"], ["2", "needle asked", "50%"], ["3", "needle returned", "90%"]]
    assert page.is_visible("#d-returned-box") and page.text_content("#d-returned") == s.returned_text
    assert page.text_content("#d-expected-plain") == " the second needle"
    # The diff starts after the prefix: the kept random string is neither struck out nor added.
    assert "abc1" not in page.text_content("#d-expected") and "abc1" not in page.text_content("#d-reply")
    assert page.eval_on_selector_all("#d-expected del", "e => e.map(x => x.textContent)") == ["second needle"]
    assert page.errors == []


LENGTHS = "e => e.map(x => Number(x.textContent.replace(/,/g, '')))"


def test_browser_search_filters_sorts_and_deep_links(open_page):
    samples = [sample(i, context_chars=1000 + 37 * (i * 7 % 50), truncated=i % 6 == 0) for i in range(50)]
    samples[17] = sample(17, reply="abc17 a reply about Zanzibar", context_chars=5)
    page = open_page(report(samples))
    page.fill("#f-search", "zanzibar")
    assert [r["row"] for r in table_rows(page)] == [17]
    page.fill("#f-search", "")
    page.select_option("#f-prefix", "late")
    assert {s.row for s in samples if s.prefix == "late"} == {r["row"] for r in all_pages(page)}
    page.select_option("#f-prefix", "")
    page.select_option("#f-truncated", "yes")
    assert {s.row for s in samples if s.truncated} == {r["row"] for r in all_pages(page)}
    page.select_option("#f-truncated", "")
    page.select_option("#f-ordinal", "3")
    assert {s.row for s in samples if s.target_ordinal == 3} == {r["row"] for r in all_pages(page)}
    page.select_option("#f-ordinal", "")
    page.select_option("#f-depth", "4")
    assert {s.row for s in samples if s.target_depth is not None and int(s.target_depth * 10) == 4} == {
        r["row"] for r in all_pages(page)}
    page.select_option("#f-depth", "")
    page.click("#samples th[data-sort=length]")
    lengths = page.eval_on_selector_all("#samples td.length", LENGTHS)
    assert lengths == sorted(lengths) and lengths[0] == 5
    page.click("#samples th[data-sort=length]")  # again: the other way
    lengths = page.eval_on_selector_all("#samples td.length", LENGTHS)
    assert lengths == sorted(lengths, reverse=True)
    page.click("#samples th[data-sort=depth]")
    depths = [s.target_depth for s in samples]
    shown = page.eval_on_selector_all("#samples td.depth", "e => e.map(x => parseFloat(x.textContent))")
    assert shown == sorted(100 * d for d in depths)
    # Opening a sample writes its deep link; the link opens it in a fresh page, whatever the filters.
    page.select_option("#f-outcome", "target")
    page.click("#samples tbody tr >> nth=1")
    link = page.evaluate("location.href")
    title = page.text_content("#d-title")
    fresh = page.context.new_page()
    fresh.goto(link)
    fresh.wait_for_selector("#detail:not([hidden])")
    assert fresh.text_content("#d-title") == title
    fresh.goto(link.split("#")[0] + "#run-2.parquet:2")  # a file's name alone, unencoded, works too
    fresh.wait_for_selector("#detail:not([hidden])")
    assert fresh.text_content("#d-title") == "run-2.parquet · row 2"
    fresh.close()
    assert page.errors == []


def test_compare_pairs_the_rows_that_changed_largest_score_change_first():
    from mrcr_gen.eval._compare_view import flipped_rows

    first = report([sample(0, score=1.0, outcome="target"), sample(1, score=0.5, outcome="target"),
                    sample(2, score=0.9, outcome="target")])
    second = report([sample(0, score=1.0, outcome="target"), sample(1, score=0.4, outcome="target"),
                     sample(2, score=0.0, outcome="other_needle"), sample(3)])
    pairs = flipped_rows(first, second)
    assert [(a.row, a.score, b.score, b.outcome) for a, b in pairs] == [
        (2, 0.9, 0.0, "other_needle"), (1, 0.5, 0.4, "target")
    ]
    page = render_compare([first, second])
    table = re.search(r'<table id="flips-1".*?</table>', page, re.S).group(0)
    assert "2 rows changed" in page and table.count("<tr>") == 3 and "-0.900" in table
