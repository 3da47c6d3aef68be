"""A command run as a real process tree, stopped by a signal: which of its descendants are left,
and which output files were put in place after the command had ended."""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[2]
#: Bounds on waits (not timings asserted): a machine under load starts Python slowly.
START_DEADLINE = 240.0
EXIT_DEADLINE = 15.0
#: For the command itself to stop (a local Ray instance takes a while to shut down).
STOP_DEADLINE = 60.0


@dataclass
class Stopped:
    returncode: int
    stderr: str
    left: list[str] = field(default_factory=list)  # descendants still running after EXIT_DEADLINE
    written_after: list[str] = field(default_factory=list)  # output files put in place after the command ended
    descendants: list[str] = field(default_factory=list)  # every descendant seen before the signal


def cli(command: str, *args: str) -> list[str]:
    """The console script `command` (mrcr-gen, mrcr-validate ...), run by this Python."""
    main = {"mrcr-gen": "gen_main", "mrcr-validate": "validate_main"}[command]
    return [sys.executable, "-c", f"from mrcr_gen.cli import {main}; {main}()", *args]


def command_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="disabled")
    return env | extra


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _describe(process: psutil.Process) -> str:
    try:
        return f"{process.pid} {' '.join(process.cmdline())[:100]}"
    except psutil.Error:
        return str(process.pid)


def complete_files(folder: Path) -> dict[Path, float]:
    """Output files in place (not temporary ones), with when they were put there (ctime: a rename sets it)."""
    found = {}
    for path in folder.rglob("*"):
        if path.is_file() and not path.name.endswith(".partial"):
            with contextlib.suppress(FileNotFoundError):
                found[path] = path.stat().st_ctime
    return found


def stop_while_running(
    args: list[str],
    out: Path,
    sig: signal.Signals,
    ready: Callable[[psutil.Process], bool],
    *,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    slow_to_exit: Callable[[str], bool] = lambda _: False,
    slow_deadline: float = 0.0,
) -> Stopped:
    """Start `args`, wait until `ready(process)` (bounded), send `sig` to the command alone, then
    wait (bounded) for it and every descendant it had to end; descendants `slow_to_exit` (by
    their description) are given `slow_deadline` more. Whatever is left is killed after."""
    # A file, not a pipe: descendants that outlive the command would hold a pipe open.
    errors = out.parent / f"{out.name}.stderr"
    with open(errors, "w") as stderr:
        process = subprocess.Popen(args, env=env or command_env(), cwd=cwd, stdout=subprocess.DEVNULL, stderr=stderr)
    main = psutil.Process(process.pid)
    descendants: dict[int, psutil.Process] = {}
    try:
        deadline = time.monotonic() + START_DEADLINE
        while not ready(main):
            assert process.poll() is None, f"the command ended before it was stopped: {errors.read_text()}"
            assert time.monotonic() < deadline, "the command never got ready"
            time.sleep(0.05)
        for child in main.children(recursive=True):
            descendants[child.pid] = child
        described = {pid: _describe(child) for pid, child in descendants.items()}  # while they run
        process.send_signal(sig)
        process.wait(timeout=STOP_DEADLINE)
        # Once reaped, the command makes no more system calls: a file put in place later can only
        # be a descendant's that outlived it. (Not the moment of the signal: the command may finish
        # a rename it was making then, or be killed only when next scheduled, on a loaded machine.)
        # File times come from a clock a tick behind this one: none before this moment looks later.
        ended = time.time()
        deadline = time.monotonic() + EXIT_DEADLINE
        while any(_alive(p) for p in descendants.values()) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = [described[pid] for pid, p in descendants.items() if _alive(p)]
        deadline = time.monotonic() + slow_deadline
        while left and all(map(slow_to_exit, left)) and time.monotonic() < deadline:
            time.sleep(0.5)
            left = [described[pid] for pid, p in descendants.items() if _alive(p)]
        written_after = sorted(
            str(path.relative_to(out)) for path, ctime in complete_files(out).items() if ctime > ended
        )
        return Stopped(process.returncode, errors.read_text(), left, written_after, list(described.values()))
    finally:
        for leftover in [main, *descendants.values()]:
            if _alive(leftover):
                with contextlib.suppress(psutil.Error):
                    leftover.kill()
        if process.poll() is None:
            process.wait()


def units_running(workers: int) -> Callable[[psutil.Process], bool]:
    """Ready when the command has at least `workers` descendants besides the fork server and the
    resource tracker (its pool's workers have started)."""

    def ready(main: psutil.Process) -> bool:
        try:
            children = main.children(recursive=True)
        except psutil.Error:
            return False
        return len(children) >= workers + 2

    return ready


def file_written(folder: Path, pattern: str = "*.parquet") -> Callable[[psutil.Process], bool]:
    """Ready once a file matching `pattern` is in place under `folder` (the work is under way)."""
    return lambda _: folder.is_dir() and any(folder.rglob(pattern))


def _call(spec: str) -> Any:
    """The object a "module:name" spec names."""
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def fork_server(main: str, setup: str | None = None) -> None:
    """A process that imported `main` ("module:function" taking an argument list) once and forks a
    child per command, so a test can SIGKILL a real command process that started in milliseconds.
    Its own process is single-threaded: a fork from a test process, whose threads and pools do
    not exist in the child, can hang the child. Reads lines from stdin: ``run ARGS-JSON`` answers
    ``pid N`` (the child's output is discarded, its exit code is the command's), ``wait N`` answers
    ``exit CODE`` (negative: the signal that ended it)."""
    command = _call(main)
    if setup:
        _call(setup)()
    for line in sys.stdin:
        verb, _, rest = line.strip().partition(" ")
        if verb == "run":
            pid = os.fork()
            if pid == 0:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, 1)
                os.dup2(devnull, 2)
                code: Any = 0
                try:
                    command(json.loads(rest))
                except SystemExit as exc:
                    code = exc.code
                finally:
                    os._exit(int(code or 0) if not isinstance(code, str) else 2)
            print(f"pid {pid}", flush=True)
        elif verb == "wait":
            _, status = os.waitpid(int(rest), 0)
            print(f"exit {os.waitstatus_to_exitcode(status)}", flush=True)


class Forker:
    """A running `fork_server`: `kill_when` runs one command in it."""

    def __init__(self, main: str, setup: str | None = None, env: dict[str, str] | None = None):
        serve = "import sys; from tests.support.processes import fork_server; fork_server(*sys.argv[1:])"
        args = [sys.executable, "-c", serve, main]
        self.process = subprocess.Popen(
            [*args, *([setup] if setup else [])],
            env=env or command_env(),
            cwd=ROOT,
            text=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )

    def _ask(self, line: str) -> str:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        return self.process.stdout.readline().split()[-1]

    def kill_when(self, args: list[str], ready: Callable[[], bool]) -> tuple[int, bool]:
        """Run the command with `args` in a child and SIGKILL it once `ready()` holds; (its exit
        code, whether it was killed). A child that ends before `ready()` holds is left to end."""
        pid = int(self._ask("run " + json.dumps(args)))
        child = psutil.Process(pid)
        killed = False
        try:
            deadline = time.monotonic() + START_DEADLINE
            while _alive(child) and not ready():
                assert time.monotonic() < deadline, "the command neither ended nor got ready"
                time.sleep(0.005)
            if _alive(child):
                children = child.children(recursive=True)
                child.kill()
                killed = True
                for descendant in children:  # what the command started dies with it, as the rules require of it
                    with contextlib.suppress(psutil.Error):
                        descendant.kill()
        finally:
            if not killed and _alive(child):
                child.kill()
            code = int(self._ask(f"wait {pid}"))
        return code, killed

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=STOP_DEADLINE)
