"""`compute_forked`: a value computed in a forked child and handed back, or computed here whenever
the child cannot give it (never a wrong or missing value), and a child that dies with its parent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable

import pytest

from mrcr_gen.engines import _forked
from mrcr_gen.engines._forked import Forked, compute_forked

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


@pytest.fixture(autouse=True)
def single_threaded(request, monkeypatch):
    """This process as a fork server's preload is: no other thread (earlier tests may leave some,
    e.g. a pool's, which the trivial values computed here cannot meet); but where a test says so."""
    if "threads" not in request.node.name:
        monkeypatch.setattr(_forked, "_other_threads", lambda: False)


def _where() -> tuple[int, list[str]]:
    return os.getpid(), ["x" * 1000] * 5000  # several pipe buffers' worth


def test_the_value_is_computed_in_a_child_and_handed_back():
    forked = compute_forked(_where)
    pid, big = forked.result()
    assert pid != os.getpid()
    assert big == ["x" * 1000] * 5000


def _raise() -> None:
    raise RuntimeError("only in the child")


def _exit_badly() -> None:
    os._exit(3)


def _in_child_only(misstep: Callable[[], None]) -> Callable[[], int]:
    """A value whose computation does `misstep` in a forked child, and gives 7 here."""
    parent = os.getpid()

    def compute() -> int:
        if os.getpid() != parent:
            misstep()
        return 7

    return compute


@pytest.mark.parametrize("misstep", [_raise, _exit_badly])
def test_a_child_that_fails_or_exits_without_its_value_leaves_it_to_be_computed_here(misstep):
    assert compute_forked(_in_child_only(misstep)).result() == 7


def test_a_child_stuck_past_the_patience_is_killed_and_the_value_computed_here(monkeypatch):
    monkeypatch.setattr(_forked, "PATIENCE", 0.3)
    forked = compute_forked(_in_child_only(lambda: time.sleep(60)))
    child = forked._pid
    assert child is not None
    assert forked.result() == 7
    with pytest.raises(ChildProcessError):  # killed and reaped
        os.waitpid(child, os.WNOHANG)


def test_with_other_threads_running_nothing_is_forked():
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        forked = compute_forked(_where)
        assert forked._pid is None
        assert forked.result()[0] == os.getpid()
    finally:
        stop.set()
        thread.join()


def test_without_a_child_the_value_is_computed_here():
    assert Forked(_where).result()[0] == os.getpid()


PARENT = """
import os, sys, time
from mrcr_gen.engines._forked import compute_forked
def slow():
    time.sleep(60)
    return 1
forked = compute_forked(slow)
print(forked._pid, flush=True)
time.sleep(60)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_the_child_dies_with_its_parent():
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        os.kill(child, 0)  # running
    finally:
        parent.kill()
        parent.wait()
    for _ in range(100):
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return
        with open(f"/proc/{child}/stat") as stat:
            if stat.read().split(")")[-1].split()[0] == "Z":  # ended, not yet reaped by init
                return
        time.sleep(0.05)
    os.kill(child, signal.SIGKILL)
    pytest.fail("the child outlived its parent")
