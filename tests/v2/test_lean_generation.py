"""`mrcr-gen --recipe mrcr-v2` as a process does only what its files need: a CSV generation never
imports pyarrow or numpy (a tenth of a second of its start), a parquet one never pandas (half a
second), and the process ends without the interpreter's teardown (`leave_at_once`) yet with its
exit handlers run, its output flushed and its exit code kept."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mrcr_gen.recipes.mrcr_v2 import iter_v2_rows

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("pyarrow", "numpy", "pandas")

PROBE = """
import atexit, json, sys
from mrcr_gen.cli import gen_main
heavy = json.loads(sys.argv[1])
atexit.register(lambda: print("LOADED " + json.dumps([m for m in heavy if m in sys.modules]), flush=False))
sys.argv = ["mrcr-gen", *sys.argv[2:]]
gen_main()
"""


def run_gen(*args: str) -> subprocess.CompletedProcess:
    env = os.environ | {"PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(HEAVY), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=ROOT,
    )


def loaded(done: subprocess.CompletedProcess) -> list[str]:
    [line] = [line for line in done.stdout.splitlines() if line.startswith("LOADED ")]
    return json.loads(line.removeprefix("LOADED "))


@pytest.mark.parametrize("file_format", ["csv", "parquet"])
def test_a_generation_loads_pyarrow_only_for_parquet(file_format, tmp_path):
    out = tmp_path / "data"
    options = ["--recipe", "mrcr-v2", "--tokens", "8192", "--samples", "3", "--rows-per-transcript", "2"]
    done = run_gen(*options, "--format", file_format, "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "MRCR v2 rows written to" in done.stdout  # the summary table, flushed before the exit
    [path] = sorted(out.rglob(f"*.{file_format}"))
    assert len(list(iter_v2_rows(path))) == 3
    # pyarrow (and numpy, which mrcr_gen._parquet uses) for parquet alone; pandas never (`pa.array` imports it)
    assert loaded(done) == ([] if file_format == "csv" else ["pyarrow", "numpy"])


def test_a_refused_generation_keeps_its_exit_code_and_message(tmp_path):
    done = run_gen("--recipe", "mrcr-v2", "--samples", "0", "--out", str(tmp_path / "data"))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("mrcr-gen: error:")
    assert loaded(done) == []
    assert not (tmp_path / "data").exists()


def test_a_thread_still_writing_at_the_exit_finishes_its_file(tmp_path):
    # As the interpreter's own exit: threads' exit hooks run and running threads are waited for
    # before the process ends without its teardown.
    marker = tmp_path / "written"
    code = (
        "import threading, time, sys\n"
        "from mrcr_gen.cli._common import leave_at_once\n"
        "def write():\n"
        "    time.sleep(0.5)\n"
        f"    open({str(marker)!r}, 'w').write('done')\n"
        "threading.Thread(target=write).start()\n"
        "leave_at_once(3)\n"
    )
    env = os.environ | {"PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
    assert done.returncode == 3, done.stderr
    assert marker.read_text() == "done"
