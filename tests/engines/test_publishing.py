"""Only the process that runs an engine puts files in place: a unit run by a worker (a local
process, a Ray task) leaves each file it finished at its temporary path, and the engine moves it
when it hands the unit's result to its caller. A caller that is gone, however late its workers
notice, can put nothing in place (the deterministic race is in test_processes.py)."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import Future
from pathlib import Path

import pytest

from mrcr_gen import _files
from mrcr_gen.engines import LocalEngine
from mrcr_gen.engines._local import _PoolCall, _Unit
from mrcr_gen.engines._ray import process_identity
from tests.support.processes import ROOT, command_env

from .units import write_then


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_deferred_files_stay_temporary_until_published_in_the_order_they_were_finished(tmp_path: Path) -> None:
    with _files.publishing_deferred() as moves:
        _files.write_text_atomic(tmp_path / "a.parquet", "rows")
        _files.write_text_atomic(tmp_path / "a.samples.jsonl", "records")
    assert [Path(target).name for _, target in moves] == ["a.parquet", "a.samples.jsonl"]
    assert [name.endswith(".partial") for name in _names(tmp_path)] == [True, True]
    _files.write_text_atomic(tmp_path / "b.txt", "now")  # outside the block: moved at once
    assert (tmp_path / "b.txt").read_text() == "now"
    _files.publish(moves)
    assert _names(tmp_path) == ["a.parquet", "a.samples.jsonl", "b.txt"]
    assert (tmp_path / "a.samples.jsonl").read_text() == "records"


def test_a_block_that_fails_leaves_none_of_the_files_it_finished(tmp_path: Path) -> None:
    with pytest.raises(ValueError), _files.publishing_deferred():
        _files.write_text_atomic(tmp_path / "a.parquet", "rows")
        raise ValueError("later")
    assert _names(tmp_path) == []


def test_a_move_that_fails_removes_it_and_the_rest(tmp_path: Path) -> None:
    with _files.publishing_deferred() as moves:
        for name in ("a", "b", "c"):
            _files.write_text_atomic(tmp_path / name, name)
    moves[1] = (moves[1][0], str(tmp_path / "gone" / "b"))  # a folder that does not exist
    with pytest.raises(FileNotFoundError):
        _files.publish(moves)
    assert _names(tmp_path) == ["a"]


def test_a_discarded_move_leaves_nothing(tmp_path: Path) -> None:
    with _files.publishing_deferred() as moves:
        _files.write_text_atomic(tmp_path / "a", "a")
    _files.discard(moves)
    assert _names(tmp_path) == []


@pytest.mark.parametrize("workers", [1, 2])
def test_a_units_file_is_in_place_when_its_result_is_yielded(tmp_path: Path, workers: int) -> None:
    units = [(str(tmp_path / f"{i}.txt"), "return") for i in range(4)]
    with LocalEngine(workers) as engine:
        for i, result in enumerate(engine.map(write_then, units)):
            # Seen from the unit: in place at once in this process, not yet in a worker's.
            assert result == (f"{i}.txt" if workers == 1 else "not in place")
            assert (tmp_path / f"{i}.txt").read_text() == "written"
    assert _names(tmp_path) == [f"{i}.txt" for i in range(4)]


def test_the_files_of_a_unit_that_fails_in_a_worker_are_removed(tmp_path: Path) -> None:
    with LocalEngine(2) as engine, pytest.raises(ValueError, match="failed after writing"):
        list(engine.map(write_then, [(str(tmp_path / "a.txt"), "fail")]))
    assert _names(tmp_path) == []


def test_the_files_of_units_ended_but_not_received_are_removed(tmp_path: Path) -> None:
    # As when the caller stops reading (or is interrupted) with results waiting.
    with _files.publishing_deferred() as moves:
        _files.write_text_atomic(tmp_path / "ended.txt", "x")
    ended: Future = Future()
    ended.set_result(("result", moves))
    failed: Future = Future()
    failed.set_exception(ValueError("its own error"))
    call = _PoolCall(LocalEngine(1), write_then, 1, None)
    call.pending = {0: _Unit(0, (), ended), 1: _Unit(1, (), failed), 2: _Unit(2, (), None)}
    call.discard_unreceived()
    assert _names(tmp_path) == []


RAY_UNIT = """
import sys
from mrcr_gen.engines import _ray
from tests.engines.units import write_then

result, moves = _ray._run_unit(None, write_then, sys.argv[1], "return")
print(result, [target for _, target in moves] == [sys.argv[1]])
"""


def test_a_ray_task_leaves_its_files_for_the_driver_to_move(tmp_path: Path) -> None:
    target = tmp_path / "part.parquet"
    done = subprocess.run(
        [sys.executable, "-c", RAY_UNIT, str(target)],
        env=command_env(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (done.returncode, done.stdout) == (0, "not in place True\n"), done.stderr
    assert [name.endswith(".partial") for name in _names(tmp_path)] == [True]


def test_a_process_identity_is_none_once_the_process_is_gone() -> None:
    child = subprocess.Popen(["sleep", "60"])
    identity = process_identity(child.pid)
    assert identity is not None and identity[0] == child.pid
    assert process_identity(child.pid) == identity
    child.kill()
    child.wait()
    assert process_identity(child.pid) is None
