"""Top-level work units for engine tests (importable by worker processes)."""

from __future__ import annotations

import os
from pathlib import Path

from mrcr_gen import OfflineWriter
from mrcr_gen.engines import report_progress


def square(x: int) -> int:
    return x * x


def fail_with(message: str) -> None:
    raise ValueError(message)


def die_once(x: int, marker_dir: str) -> int:
    """Kills its own worker the first time it runs for `x` (a marker file remembers), then works."""
    marker = Path(marker_dir) / f"died-{x}"
    if not marker.exists():
        marker.write_text("x")
        os._exit(1)
    return x * x


def report_steps(steps: int) -> int:
    """Reports `steps` steps done, one at a time, and returns how many it reported."""
    for _ in range(steps):
        report_progress(1)
    return steps


def always_die(x: int) -> int:
    os._exit(1)


def o200k_built() -> bool:
    """Whether this process had o200k built before it ran this unit."""
    from mrcr_gen._tokens import token_counter

    return token_counter.cache_info().currsize == 1


def started_warm() -> tuple[bool, bool, bool, bool]:
    """Whether this process had the offline writer's pools before it ran this unit, whether it had
    imported Faker (which only rendering them needs), whether its heap was frozen (`gc.freeze`),
    and whether it had the default catalog's ask facts."""
    import gc
    import sys

    from mrcr_gen.recipes.openai_mrcr import _offline_words
    from mrcr_gen.recipes.openai_mrcr._assembler import ask_facts

    pools, faker = _offline_words._POOLS is not None, "faker" in sys.modules
    return pools, faker, gc.get_freeze_count() > 0, ask_facts.cache_info().currsize == 1


def fail_to_start(*_args) -> None:
    """A pool initializer that fails: every worker dies before it runs a unit."""
    raise RuntimeError("this worker cannot start")


def square_unless_marked(x: int, killer: int, runs_dir: str) -> int:
    """x * x, slowly enough that units overlap, except that unit `killer` always kills its worker;
    every run leaves a file in `runs_dir`, to count them."""
    import time

    (Path(runs_dir) / f"{x}-{time.monotonic_ns()}").write_text("x")
    time.sleep(0.05)
    if x == killer:
        os._exit(1)
    return x * x


class DyingOnceWriter(OfflineWriter):
    """The offline writer, except that the first process to compose a writing kills itself:
    the task it ran must be retried elsewhere. Same description, so the same build fingerprint."""

    def __init__(self, seed: int, marker_dir: str) -> None:
        super().__init__(seed)
        self.marker_dir = marker_dir
        # mrcr-gen composes a few writings in the calling process too (to check that the needles
        # fit the bin): only a worker may die.
        self.caller = os.getpid()

    def compose(self, ask, variant):
        marker = Path(self.marker_dir) / "died"
        if os.getpid() != self.caller and not marker.exists():
            marker.write_text(str(os.getpid()))
            os._exit(1)
        return super().compose(ask, variant)


class FewSharedKeysWriter(OfflineWriter):
    """The offline writer with a small shared-writings space, so tests can afford to compose it."""

    def shared_keys(self):
        return super().shared_keys()[:3000]


def write_chunk_dying_on_2needle_chunk_1(unit):
    """`write_chunk`, except that the worker given chunk 1 of the 2-needle file dies."""
    from mrcr_gen.generate import write_chunk

    if unit.parts is not None and unit.index == 1 and unit.path.name.startswith("2needle"):
        os._exit(1)
    return write_chunk(unit)


def one_row_groups(monkeypatch) -> None:
    """Give every generated file a row group per row (the calling process plans them, see
    `chunk_groups`): then chunks of one row end where groups end, and a file joined from them has
    the bytes of the same file written whole. A test comparing the two calls this before both."""
    import mrcr_gen.generate._chunks as chunks_module

    monkeypatch.setattr(chunks_module, "GROUP_BYTES", 1)


def cut_files_into_chunks(monkeypatch) -> list:
    """Make generation cut every file into chunks of one row (and a row group per row, see
    `one_row_groups`), then join them; returns the names of the files joined by this process (the
    caller's, with a local engine), to check that they were."""
    import mrcr_gen.generate._pipeline as generate_module

    one_row_groups(monkeypatch)

    monkeypatch.setattr(
        generate_module, "plan_chunks", lambda files, workers, whole=(): [[(s,) for s in f] for f in files]
    )
    joined: list = []

    class CountedJoin(generate_module.Join):
        def finish(self) -> None:
            super().finish()
            joined.append(self.path.name)

    monkeypatch.setattr(generate_module, "Join", CountedJoin)
    return joined


def sleep_then_touch(seconds: float, path: str) -> None:
    """A unit that takes `seconds`, then writes an empty file at `path`."""
    import time

    time.sleep(seconds)
    Path(path).touch()


def _wait_for(flag: Path) -> None:
    import time

    while not flag.exists():
        time.sleep(0.01)


def finish_a_file_slow_to_see_the_caller_die(target: str, flags: str) -> str:
    """Writes `target` (atomically), in a worker that behaves as on a loaded machine that has not
    run its watch yet when the caller is killed: the thread that would end it blocks instead, and
    the kernel no longer kills it with the fork server. The test steers it with files in `flags`:
    it touches `finished` once the file is written (or `at-rename`, right before any rename it
    makes itself, i.e. after every check it makes), then waits for `go`."""
    import ctypes
    import threading

    flags_dir = Path(flags)
    os._exit = lambda code: threading.Event().wait()  # type: ignore[assignment]  # the watch never ends it
    ctypes.CDLL(None).prctl(1, 0)  # PR_SET_PDEATHSIG: none
    rename = os.replace

    def paused_rename(source, destination) -> None:
        (flags_dir / "at-rename").touch()
        _wait_for(flags_dir / "go")
        rename(source, destination)

    os.replace = paused_rename  # type: ignore[assignment]
    try:
        from mrcr_gen._files import write_text_atomic

        write_text_atomic(target, "written")
        (flags_dir / "finished").touch()
        _wait_for(flags_dir / "go")
        return "done"
    finally:
        os.replace = rename
        (flags_dir / "returned").touch()


def write_then(path: str, then: str) -> str:
    """Writes `path` (atomically), then returns its text, or raises with `then` == "fail"."""
    from mrcr_gen._files import write_text_atomic

    write_text_atomic(path, "written")
    if then == "fail":
        raise ValueError("failed after writing")
    return Path(path).name if Path(path).exists() else "not in place"
