"""Fixtures shared by test folders: `browser` (a real headless Chromium, tests/support/browser.py)."""

from tests.support.browser import browser  # noqa: F401 (a fixture, found by name)
