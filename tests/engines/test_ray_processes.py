"""`--engine ray` as real processes: a wrong --address is one line and exit 2 within the bound,
and a local Ray instance the command started does not outlive it (SIGTERM, SIGKILL)."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.support.processes import ROOT, cli, command_env, stop_while_running

pytest.importorskip("ray")

JOB = ("-b", "262144", "-s", "48", "--rows-per-file", "1", "--workers", "2", "--engine", "ray")
#: Ray's dashboard and runtime-env agents exit by themselves once their raylet is gone, after a
#: last report to the (gone) GCS times out: about a minute.
AGENTS = ("ray::DashboardAgent", "ray::RuntimeEnvAgent", "dashboard/agent.py", "runtime_env/agent/main.py")
AGENT_DEADLINE = 120.0


def test_a_wrong_address_is_one_line_and_exit_2() -> None:
    done = subprocess.run(
        cli("mrcr-gen", "--engine", "ray", "--address", "127.0.0.1:1", "--needles", "2", "-b", "8192", "-s", "1", "-o", "unused"),
        env=command_env(),
        capture_output=True,
        text=True,
        timeout=120,  # Ray alone retries for about ten minutes
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == ["mrcr-gen: error: no Ray cluster at 127.0.0.1:1 (Connection refused)"]


@pytest.mark.slow
def test_an_address_where_no_ray_answers_gives_up_after_the_bound(tmp_path: Path) -> None:
    with socket.socket() as silent:  # accepts connections, never speaks
        silent.bind(("0.0.0.0", 0))
        silent.listen(16)
        port = silent.getsockname()[1]
        done = subprocess.run(
            cli("mrcr-gen", "--engine", "ray", "--address", f"127.0.0.1:{port}", "--needles", "2", "-s", "1", "-o", str(tmp_path)),
            env=command_env(MRCR_GEN_RAY_CONNECT_TIMEOUT="3"),
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [f"mrcr-gen: error: no Ray cluster answered at 127.0.0.1:{port} within 3 s"]


def _is_agent(description: str) -> bool:
    return any(name in description for name in AGENTS)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_local_ray_instance_does_not_outlive_the_command(tmp_path: Path, sig: signal.Signals) -> None:
    out = tmp_path / "out"

    def tasks_running(main: psutil.Process) -> bool:
        try:
            return sum("ray::write_chunk" in " ".join(p.cmdline()) for p in main.children(recursive=True)) >= 2
        except psutil.Error:
            return False

    job = cli("mrcr-gen", "-o", str(out), *JOB)
    # Only after SIGKILL may the agents take their minute: the command cannot stop them itself.
    slow_to_exit = _is_agent if sig == signal.SIGKILL else lambda _: False
    stopped = stop_while_running(job, out, sig, tasks_running, slow_to_exit=slow_to_exit, slow_deadline=AGENT_DEADLINE)
    assert any("raylet" in d for d in stopped.descendants) and any("gcs_server" in d for d in stopped.descendants)
    assert stopped.left == []
    assert stopped.written_after == []
    if sig == signal.SIGTERM:
        assert stopped.returncode == 143
        assert stopped.stderr.strip().splitlines()[-1] == "mrcr-gen: terminated"


RAY_CALLER = """
import sys
from mrcr_gen.engines import RayEngine
from tests.engines.units import sleep_then_touch

engine = RayEngine(num_cpus=2)
for _ in engine.map(sleep_then_touch, [(float(sys.argv[1]), f"{sys.argv[2]}/{i}") for i in range(4)]):
    pass
"""


@pytest.mark.slow
def test_a_ray_task_of_a_killed_driver_ends_without_finishing_its_unit(tmp_path: Path) -> None:
    # Each unit sleeps 6 s (room for a loaded machine), then writes a file: Ray alone ends the task of a killed driver later.
    out = tmp_path / "out"
    out.mkdir()

    def tasks_running(main: psutil.Process) -> bool:
        try:
            return sum("ray::sleep_then_touch" in " ".join(p.cmdline()) for p in main.children(recursive=True)) >= 2
        except psutil.Error:
            return False

    caller = [sys.executable, "-c", RAY_CALLER, "6", str(out)]
    stopped = stop_while_running(
        caller, out, signal.SIGKILL, tasks_running, cwd=ROOT, slow_to_exit=_is_agent, slow_deadline=AGENT_DEADLINE
    )
    assert stopped.left == []
    assert list(out.iterdir()) == []
