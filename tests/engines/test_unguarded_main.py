"""A script that calls mrcr-gen at its top level, outside `if __name__ == "__main__":`, is run again
by every worker process multiprocessing starts (fork server, spawn): each would start the same work.
Such a call gets a warning at its line and no worker processes; a guarded one gets them."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mrcr_gen.engines import available_cores

ROOT = Path(__file__).resolve().parents[2]
ENGINE = "from mrcr_gen.engines import LocalEngine\nprint('WORKERS', LocalEngine(2).workers)\n"
GRADER = "from mrcr_gen.eval._pipeline import GradePool\nprint('PROCESSES', GradePool().processes)\n"


def _run(tmp_path: Path, source: str) -> subprocess.CompletedProcess:
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(source), encoding="utf-8")
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "PYTHONWARNINGS": "default"}
    return subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )


def _guarded(body: str) -> str:
    return "if __name__ == '__main__':\n" + textwrap.indent(body, "    ")


@pytest.mark.parametrize(
    ("source", "line"),
    [
        (ENGINE, 2),
        ("import os\n\n\ndef main():\n" + textwrap.indent(ENGINE, "    ") + "\n\nmain()\n", 9),
    ],
    ids=["top-level", "function-called-at-top-level"],
)
def test_an_unguarded_call_runs_without_workers_and_says_where(tmp_path, source, line):
    done = _run(tmp_path, source)
    assert done.returncode == 0, done.stderr
    assert "WORKERS 1" in done.stdout
    assert f"job.py:{line}: RuntimeWarning" in done.stderr
    assert 'if __name__ == "__main__":' in done.stderr


def test_a_guarded_call_gets_its_workers(tmp_path):
    done = _run(tmp_path, _guarded(ENGINE))
    assert done.returncode == 0, done.stderr
    assert "WORKERS 2" in done.stdout
    assert "RuntimeWarning" not in done.stderr


@pytest.mark.skipif(available_cores() < 2, reason="grading processes are used only with 2 cores or more")
def test_grading_stays_in_a_thread_under_an_unguarded_call(tmp_path):
    unguarded = _run(tmp_path, GRADER)
    assert "PROCESSES False" in unguarded.stdout
    assert "job.py:2: RuntimeWarning" in unguarded.stderr
    guarded = _run(tmp_path, _guarded(GRADER))
    assert "PROCESSES True" in guarded.stdout, guarded.stderr
    assert "RuntimeWarning" not in guarded.stderr
