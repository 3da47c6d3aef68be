"""Fixtures shared by test folders: `browser` (a real headless Chromium, tests/support/browser.py),
and each test's own user cache folder."""

import pytest

from tests.support.browser import browser  # noqa: F401 (a fixture, found by name)


@pytest.fixture(autouse=True)
def _own_cache_folder(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's own user cache folder (token counts, writings): never the user's, never shared."""
    monkeypatch.setenv("MRCR_GEN_CACHE", str(tmp_path_factory.mktemp("mrcr-gen-cache")))
