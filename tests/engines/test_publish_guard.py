"""A Ray worker whose driver died moves no finished file into place, even while its raylet (and
the watch thread that ends the worker) has not noticed yet; a live driver's files are written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mrcr_gen import _files
from mrcr_gen.engines._ray import process_identity
from tests.support.processes import ROOT, command_env

UNIT = """
import subprocess, sys, threading, time, types
from mrcr_gen.engines import _ray
from mrcr_gen._files import write_text_atomic

# The watch thread looks once, then sleeps for an hour: only the check at the move is left.
watch_asleep = threading.Event()
_ray.time = types.SimpleNamespace(sleep=lambda _: (watch_asleep.set(), time.sleep(3600)))
driver = subprocess.Popen(["sleep", "60"])
identity = _ray.process_identity(driver.pid)

def unit(path, kill_driver):
    assert watch_asleep.wait(30)
    if kill_driver == "yes":
        driver.kill()
        driver.wait()
    write_text_atomic(path, "written")
    return "done"

print(_ray._run_unit(identity, unit, sys.argv[1], sys.argv[2]))
driver.kill()
"""


@pytest.mark.parametrize("driver_dies", [False, True], ids=["driver alive", "driver killed"])
def test_a_unit_moves_its_file_into_place_only_while_its_driver_lives(tmp_path: Path, driver_dies: bool) -> None:
    target = tmp_path / "part.parquet"
    done = subprocess.run(
        [sys.executable, "-c", UNIT, str(target), "yes" if driver_dies else "no"],
        env=command_env(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if driver_dies:
        assert (done.returncode, done.stdout) == (1, "")
        assert list(tmp_path.iterdir()) == []  # neither the file nor its temporary
    else:
        assert (done.returncode, done.stdout, target.read_text()) == (0, "done\n", "written")
        assert [p.name for p in tmp_path.iterdir()] == ["part.parquet"]


def test_a_process_identity_is_none_once_the_process_is_gone() -> None:
    child = subprocess.Popen(["sleep", "60"])
    identity = process_identity(child.pid)
    assert identity is not None and identity[0] == child.pid
    assert process_identity(child.pid) == identity
    child.kill()
    child.wait()
    assert process_identity(child.pid) is None


def test_a_publish_guard_that_raises_stops_the_move_and_leaves_no_temporary(tmp_path: Path, monkeypatch) -> None:
    def refuse() -> None:
        raise RuntimeError("refused")

    monkeypatch.setattr(_files, "_before_publish", [])
    _files.add_publish_guard(refuse)
    _files.add_publish_guard(refuse)
    assert _files._before_publish == [refuse]
    with pytest.raises(RuntimeError, match="refused"):
        _files.write_text_atomic(tmp_path / "a.txt", "x")
    assert list(tmp_path.iterdir()) == []


LOCAL_UNIT = """
import multiprocessing, sys, types
from mrcr_gen.engines import _local
from mrcr_gen._files import write_text_atomic

# No watch thread (a loaded machine may not run it for seconds): only the check at the move is left.
_local.threading = types.SimpleNamespace(Thread=lambda **_: types.SimpleNamespace(start=lambda: None))
_local._reports = types.SimpleNamespace(put=lambda report: None)
caller_alive, caller_end = multiprocessing.Pipe(duplex=False)
_local._die_with_caller(caller_alive)

def unit(path, caller_dies):
    if caller_dies == "yes":
        caller_end.close()  # as the kernel closes it when the caller dies
    write_text_atomic(path, "written")
    return "done"

print(_local._run_unit(unit, 0, 0, (sys.argv[1], sys.argv[2]), False))
"""


@pytest.mark.parametrize("caller_dies", [False, True], ids=["caller alive", "caller gone"])
def test_a_local_worker_moves_its_file_into_place_only_while_its_caller_lives(tmp_path: Path, caller_dies: bool) -> None:
    target = tmp_path / "part.parquet"
    done = subprocess.run(
        [sys.executable, "-c", LOCAL_UNIT, str(target), "yes" if caller_dies else "no"],
        env=command_env(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if caller_dies:
        assert (done.returncode, done.stdout) == (1, "")
        assert list(tmp_path.iterdir()) == []
    else:
        assert (done.returncode, done.stdout, target.read_text()) == (0, "done\n", "written")
