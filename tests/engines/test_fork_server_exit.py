"""The fork server ends at once when its caller has gone (`engines/_fork_server.py`): it does not
free what it preloaded, which took about 0.13 s after the caller had ended, and a caller killed
while the server still preloads takes it along. Ctrl-C during the preload is the caller's alone.
Anyone else importing that module keeps their own exit and exit code."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CALLER = """
import multiprocessing.forkserver
from mrcr_gen.engines._local import ensure_fork_server

if __name__ == "__main__":
    ensure_fork_server(["tests.engines._teardown_probe"])
    print(multiprocessing.forkserver._forkserver._forkserver_pid, flush=True)
"""


def _run(code: str, probe: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), MRCR_TEARDOWN_PROBE=str(probe))
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def _gone(pid: int, within: float = 30.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_an_ordinary_importer_keeps_its_exit_code_and_its_teardown(tmp_path: Path) -> None:
    probe = tmp_path / "torn-down"
    done = _run("import tests.engines._teardown_probe, mrcr_gen.engines._fork_server, sys; sys.exit(3)", probe)
    assert done.returncode == 3, done.stderr[-2000:]
    assert probe.read_text().strip()  # the probe's witness was freed: modules were torn down


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the fork server runs on Linux")
def test_the_fork_server_ends_without_tearing_down_what_it_preloaded(tmp_path: Path) -> None:
    probe = tmp_path / "torn-down"
    done = _run(CALLER, probe)
    assert done.returncode == 0, done.stderr[-2000:]
    server = int(done.stdout.split()[-1])
    assert _gone(server)
    assert not probe.exists()  # the server preloaded the witness and left without freeing it


SLOW_CALLER = """
import multiprocessing.forkserver, os, signal, sys, time
from mrcr_gen.engines._local import ensure_fork_server

if __name__ == "__main__":
    ensure_fork_server(["tests.engines._slow_preload"])
    print(multiprocessing.forkserver._forkserver._forkserver_pid, flush=True)
    time.sleep(1)  # the server is preloading (a minute's sleep)
    if sys.argv[1] == "interrupt":
        os.kill(multiprocessing.forkserver._forkserver._forkserver_pid, signal.SIGINT)
        time.sleep(1)
    os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
@pytest.mark.parametrize("how", ["killed", "interrupt"])
def test_a_caller_killed_while_the_server_preloads_takes_it_along(tmp_path: Path, how: str) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT), MRCR_TEARDOWN_PROBE=str(tmp_path / "unused"))
    errors = tmp_path / "stderr"
    # Not subprocess.run: it would wait for the server too, which holds the caller's output pipes.
    with errors.open("w") as stderr:
        caller = subprocess.Popen(
            [sys.executable, "-c", SLOW_CALLER, how], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True
        )
        assert caller.stdout is not None
        server = int(caller.stdout.readline())
        assert caller.wait(timeout=120) == -9
    # Its preload sleeps a minute: gone well before that, it died with its caller.
    assert _gone(server, within=30.0)
    assert "KeyboardInterrupt" not in errors.read_text()  # Ctrl-C during the preload: no traceback of the server's
