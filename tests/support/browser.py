"""A real headless Chromium for tests (playwright driving the system's /usr/bin/chromium; it never
downloads a browser). Tests that use the `browser` fixture skip where chromium or playwright is
missing, unless MRCR_REQUIRE_BROWSER=1 (set by .ci/run), where they fail instead."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


def unavailable() -> str | None:
    if not Path(CHROMIUM).exists():
        return f"{CHROMIUM} is absent (apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not importable (pip install playwright)"
    return None


@contextlib.contextmanager
def open_browser(profile: Path) -> Iterator:
    """A headless Chromium context (skips or fails the test as the module docstring says). Playwright's
    sync API runs an event loop in this thread while it is open: asyncio.run fails inside."""
    reason = unavailable()
    if reason:
        if os.environ.get("MRCR_REQUIRE_BROWSER") == "1":
            pytest.fail(f"browser tests required here, but {reason}")
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        context = driver.chromium.launch_persistent_context(
            str(profile),
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1200, "height": 800},
        )
        try:
            yield context
        finally:
            context.close()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    with open_browser(tmp_path_factory.mktemp("chromium-profile")) as context:
        yield context
