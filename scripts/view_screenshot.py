"""Regenerate docs/images/view.png: the HTML report of a synthetic run, one sample opened.

Needs playwright (the `test` extra) and the system's /usr/bin/chromium; downloads nothing.
Run from the repository root: `python scripts/view_screenshot.py`.
"""

from __future__ import annotations

import random
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mrcr_gen.eval._report import plot_summary  # noqa: E402
from mrcr_gen.eval._view import ViewReport, ViewSample, render_view, write_html  # noqa: E402

CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
BINS = [(f"({u // 2}, {u}]", u) for u in (8192, 16384, 32768, 65536, 131072)]
WORDS = ("the kettle hums a quiet song of leaves that steep in amber light while morning waits "
         "beside the window and the cup remembers every hand that held it warm").split()
POEM = """Prepend zq7Lm2 to the poem.

zq7Lm2 The kettle hums a quiet song,
of leaves that steep in amber light;
the morning waits beside the window
and the cup remembers every hand."""


def synthetic(rng: random.Random) -> tuple[list[ViewSample], list[dict], dict]:
    samples, outcome_rows, cells = [], [], []
    for b, (label, upper) in enumerate(BINS):
        for n in (2, 4, 8):
            counts: dict[str, int] = {}
            scores = []
            for k in range(12):
                p_target = 0.95 - 0.12 * b - 0.04 * n / 2
                roll = rng.random()
                outcome = ("target" if roll < p_target else "other_needle" if roll < p_target + 0.15
                           else "distractor" if roll < p_target + 0.22 else "not_in_context")
                score = round(rng.uniform(0.85, 1.0) if outcome == "target" else rng.uniform(0.1, 0.45), 3)
                words = [rng.choice(WORDS) for _ in range(60)]
                reply = list(words)
                for _ in range(3 if outcome == "target" else 20):
                    reply[rng.randrange(len(reply))] = rng.choice(WORDS)
                counts[outcome] = counts.get(outcome, 0) + 1
                scores.append(score)
                samples.append(ViewSample(
                    file=f"mrcr_{upper}.parquet", row=12 * (n // 2 - 1) + k, bin=label, bin_upper=upper, n_needles=n,
                    status="ok", score=score, outcome=outcome, prefix="ok" if rng.random() < 0.9 else "late",
                    target_ordinal=1 + k % n, returned_ordinal=1 + k % n if outcome == "target" else 1 + (k + 1) % n,
                    returned_index=2 * k + 1, target_depth=rng.random(), match_ratio=score, truncated=False,
                    query=f"Prepend zq{k}Lm to the {1 + k % n}th poem about tea. Do not include any other text.",
                    expected="zq" + " ".join(words), reply="zq" + " ".join(reply),
                ))
            outcome_rows.append({"bin": label, "n_needles": n, "count": 12,
                                 "shares": {o: c / 12 for o, c in counts.items()}})
            cells.append({"bin": label, "n_needles": n, "mean_score": sum(scores) / len(scores)})
    samples[0] = samples[0].model_copy(update={
        "expected": POEM.split("\n\n", 1)[1],
        "reply": POEM.split("\n\n", 1)[1].replace("quiet", "gentle").replace("amber", "golden") + "\nand it is good.",
        "query": POEM.split("\n\n", 1)[0], "outcome": "target", "score": 0.912, "target_depth": 0.38,
        "match_ratio": 0.912,
    })
    return samples, outcome_rows, {"cells": cells}


def main() -> None:
    from playwright.sync_api import sync_playwright

    samples, outcome_rows, summary = synthetic(random.Random(7))
    with tempfile.TemporaryDirectory() as tmp:
        plot = Path(tmp) / "plot.png"
        plot_summary(summary, plot)
        report = ViewReport(
            title="example-model on mrcr (synthetic example)",
            headline={"model": "example-model", "mean_score": sum(s.score or 0 for s in samples) / len(samples),
                      "auc_128k": 0.781, "auc_1m": None, "complete": True, "n_rows": len(samples),
                      "n_scored": len(samples), "errors": 0, "cost_usd": 1.84},
            plots={"plot.png": plot.read_bytes()}, outcomes=outcome_rows, samples=samples,
        )
        page_path = Path(tmp) / "report.html"
        write_html(render_view(report), page_path)
        with sync_playwright() as driver:
            context = driver.chromium.launch_persistent_context(
                str(Path(tmp) / "profile"), executable_path="/usr/bin/chromium", headless=True,
                args=CHROMIUM_ARGS, viewport={"width": 1200, "height": 800},
            )
            page = context.new_page()
            page.goto(page_path.as_uri())
            page.select_option("#f-bin", BINS[0][0])
            page.evaluate("document.querySelector('.browser').scrollIntoView()")
            page.click('#samples tbody tr[data-index="0"]')
            out = ROOT / "docs" / "images" / "view.png"
            out.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(out))
            context.close()
    from PIL import Image  # matplotlib's dependency: a palette PNG is a third of the size

    image = Image.open(out).convert("RGB").quantize(colors=128)
    image.save(out, optimize=True)
    print(f"wrote {out} ({out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
