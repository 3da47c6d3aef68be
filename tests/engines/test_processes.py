"""Every process a command starts dies with it: `mrcr-gen` with a pool of workers stopped by
SIGTERM (as Ctrl-C stops it) or killed with SIGKILL leaves no fork server, resource tracker or
worker behind, and no file is put in place once it has ended, however late its workers notice.
The same for the engine used in a library (a LocalEngine whose process is killed) and for
`mrcr-validate`'s pool."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.support.processes import (
    EXIT_DEADLINE,
    START_DEADLINE,
    _alive,
    cli,
    command_env,
    file_written,
    stop_while_running,
    units_running,
)

pytestmark = pytest.mark.slow

#: Files of one row of the 64K bin: each takes a worker a second or more, and 24 of them keep
#: two workers busy long after the first is written.
LONG_JOB = ("-b", "65536", "-s", "24", "--rows-per-file", "1", "--workers", "2")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_stopped_generation_leaves_no_process_and_writes_nothing_more(tmp_path: Path, sig: signal.Signals) -> None:
    out = tmp_path / "out"
    stopped = stop_while_running(cli("mrcr-gen", "-o", str(out), *LONG_JOB), out, sig, file_written(out))
    assert len(stopped.descendants) >= 4  # the fork server, the resource tracker and two workers
    assert stopped.left == []
    assert stopped.written_after == []
    if sig == signal.SIGTERM:  # as Ctrl-C: stopped in order, one line, 128 + 15
        assert stopped.returncode == 143
        assert stopped.stderr.strip().splitlines()[-1] == "mrcr-gen: terminated"
        assert not list(out.rglob("*.partial"))
    else:
        assert stopped.returncode == -signal.SIGKILL


def test_a_rerun_after_sigkill_completes_the_files_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    out = tmp_path / "out"
    job = ("-b", "16384", "-s", "12", "--rows-per-file", "2", "--workers", "2")
    stop_while_running(cli("mrcr-gen", "-o", str(out), *job), out, signal.SIGKILL, units_running(2))
    subprocess.run(cli("mrcr-gen", "-o", str(out), *job), env=command_env(), check=True, capture_output=True)
    assert len(list(out.rglob("*.parquet"))) == 6
    assert [p.name for p in out.rglob("*") if p.name.endswith(".partial")] == []


KILLED_CALLER = """
import sys, time
from mrcr_gen.engines import LocalEngine
from tests.engines.units import sleep_then_touch

engine = LocalEngine(2)
units = [(float(sys.argv[1]), f"{sys.argv[2]}/{i}") for i in range(8)]
for _ in engine.map(sleep_then_touch, units):
    pass
"""


def test_the_workers_of_a_killed_library_caller_end_at_once_without_finishing_their_units(tmp_path: Path) -> None:
    # Not only the CLI: any process that runs a LocalEngine. Each unit sleeps, then writes a file.
    process = subprocess.Popen(
        [sys.executable, "-c", KILLED_CALLER, "30", str(tmp_path)], env=command_env(), cwd=Path(__file__).parents[2]
    )
    main = psutil.Process(process.pid)
    deadline = time.monotonic() + START_DEADLINE
    while len(main.children(recursive=True)) < 4:  # fork server, resource tracker, two workers
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    descendants = main.children(recursive=True)
    process.kill()
    process.wait()
    deadline = time.monotonic() + EXIT_DEADLINE
    while any(_alive(p) for p in descendants) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [p for p in descendants if _alive(p)]
    for p in left:
        p.kill()
    assert left == []
    assert list(tmp_path.iterdir()) == []  # and with no process left, none will be written


def test_a_killed_validation_leaves_no_worker(tmp_path: Path) -> None:
    # Enough rows (about 6 MB decoded) that mrcr-validate checks them in a pool of two workers.
    from mrcr_gen import GenerateConfig, OfflineWriter, bin_by_upper, generate_dataset
    from mrcr_gen.engines import LocalEngine

    data = tmp_path / "data"
    config = GenerateConfig(needles=(4,), bins=(bin_by_upper(131072),), samples=12, seed=1, out=data, rows_per_file=3)
    with LocalEngine(2) as engine:
        generate_dataset(config, OfflineWriter(1), engine=engine)
    command = cli("mrcr-validate", str(data), "--workers", "2")
    stopped = stop_while_running(command, tmp_path / "none", signal.SIGKILL, units_running(2))
    assert len(stopped.descendants) >= 4 and stopped.left == []


SLOW_WORKER_CALLER = """
import sys
from mrcr_gen.engines import LocalEngine
from tests.engines.units import finish_a_file_slow_to_see_the_caller_die

with LocalEngine(2) as engine:
    for _ in engine.map(finish_a_file_slow_to_see_the_caller_die, [(sys.argv[1], sys.argv[2])]):
        pass
"""


def test_a_file_finished_by_a_worker_is_never_put_in_place_once_its_caller_is_killed(tmp_path: Path) -> None:
    # The race a loaded machine can run into, made certain: the worker has its file written (and
    # has made every check it makes of its caller) when the caller is killed, and it notices
    # nothing of that death until after the caller is reaped. The file must not appear then.
    out, flags = tmp_path / "out", tmp_path / "flags"
    out.mkdir()
    flags.mkdir()
    target = out / "4needle_1.parquet"
    process = subprocess.Popen(
        [sys.executable, "-c", SLOW_WORKER_CALLER, str(target), str(flags)],
        env=command_env(),
        cwd=Path(__file__).parents[2],
    )
    caller = psutil.Process(process.pid)
    descendants: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + START_DEADLINE
        while not ((flags / "finished").exists() or (flags / "at-rename").exists()):
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
        descendants = caller.children(recursive=True)
        process.kill()
        process.wait()
        (flags / "go").touch()  # the worker goes on only now
        deadline = time.monotonic() + EXIT_DEADLINE
        while not (flags / "returned").exists():
            assert time.monotonic() < deadline, "the worker never went on"
            time.sleep(0.01)
        assert [p.name for p in out.iterdir() if not p.name.endswith(".partial")] == []
    finally:
        for leftover in [caller, *descendants]:
            if _alive(leftover):
                with contextlib.suppress(psutil.Error):
                    leftover.kill()
        if process.poll() is None:
            process.wait()
