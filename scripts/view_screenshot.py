"""Regenerate docs/images/view.png and view-phone.png: the HTML report of a real mrcr-eval run
against the project's test server (tests/support/chat_server.py) standing in for a model, a sample
that returned the wrong needle opened, at 1200 px and at 420 px (a phone).

The "model" answers each row in one of the ways models fail: the right needle, the first needle
(wrong ordinal), the right needle without the random string, or the right needle cut short with a
word changed; which one depends on the row. Data: fresh rows from mrcr-gen's offline writer.
Needs playwright (the `test` extra) and the system's /usr/bin/chromium; downloads nothing.
Run from the repository root: `python scripts/view_screenshot.py`.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


def failing_model(messages: list, body: dict) -> str:
    """A reply per row, by a hash of its final query: mostly right, often the first needle."""
    from tests.support.chat_server import first_needle, no_prefix, oracle

    roll = hashlib.sha256(messages[-1]["content"].encode()).digest()[0] % 10
    if roll < 5:
        return oracle(messages, body)
    if roll < 8:
        return first_needle(messages, body)
    if roll < 9:
        return no_prefix(messages, body)
    right = oracle(messages, body)
    return right[: len(right) * 2 // 3].replace(" the ", " a ", 2)


def main() -> None:
    from playwright.sync_api import sync_playwright

    from mrcr_gen import GenerateConfig, OfflineWriter, bin_by_upper, generate_dataset, run_eval, run_view
    from mrcr_gen.eval import EvalConfig, render_view, write_html
    from tests.support.chat_server import ChatServer

    os.environ.setdefault("OPENAI_API_KEY", "sk-screenshot")
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "mrcr-data"
        bins = tuple(bin_by_upper(b) for b in (8192, 16384, 32768))
        generate_dataset(GenerateConfig(needles=(2, 4, 8), bins=bins, samples=6, seed=3, out=data), OfflineWriter(3))
        run = Path(tmp) / "run"
        files = sorted(str(p) for p in data.rglob("*.parquet"))
        with ChatServer(failing_model) as server:
            run_eval(EvalConfig(data=files, model="example-model", out=str(run), base_url=server.base_url))
        page_path = run / "report.html"
        write_html(render_view(run_view(run)), page_path)
        with sync_playwright() as driver:
            context = driver.chromium.launch_persistent_context(
                str(Path(tmp) / "profile"), executable_path="/usr/bin/chromium", headless=True,
                args=CHROMIUM_ARGS, viewport={"width": 1200, "height": 800},
            )
            shots = []
            for name, width in (("view.png", 1200), ("view-phone.png", 420)):
                page = context.new_page()
                page.set_viewport_size({"width": width, "height": 860 if width > 500 else 900})
                page.goto(page_path.as_uri())
                page.select_option("#f-outcome", "other_needle")  # the wrong needle: the strip and both writings
                page.click("#samples tbody tr >> nth=0")
                out = ROOT / "docs" / "images" / name
                out.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(out))
                shots.append(out)
                page.close()
            context.close()
    from PIL import Image  # matplotlib's dependency: a palette PNG is a third of the size

    for out in shots:
        image = Image.open(out).convert("RGB").quantize(colors=128)
        image.save(out, optimize=True)
        print(f"wrote {out} ({out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
