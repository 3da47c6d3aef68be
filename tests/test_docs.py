"""The documentation site builds without a warning (`mkdocs build --strict`, as CI runs it).

A warning is a broken link or anchor, a page missing from the nav, or a name of the Python API
page that griffe cannot resolve (e.g. after code moved without its public name). Needs the `docs`
extra, which the `test` extra includes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_mkdocs_build_strict(tmp_path):
    pytest.importorskip("mkdocstrings_handlers.python", reason="needs the docs extra: pip install '.[docs]'")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "api" / "index.html").is_file()
    assert 'id="mrcr_gen.grade_v2"' in (tmp_path / "site" / "api" / "index.html").read_text()
