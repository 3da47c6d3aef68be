"""ResultsWriter: every line flushed at once, fsynced by a thread behind the writes, never by the caller."""

from __future__ import annotations

import os
import threading

import pytest

from mrcr_gen.eval import _results
from mrcr_gen.eval._results import ResultsWriter, read_results


def _record(row: int) -> dict:
    return {"file": "a.parquet", "row": row, "status": "ok", "bin": "8k", "n_needles": 2}


class _HeldFsync:
    """os.fsync stand-in: the first call waits for `release`; every call notes the file's size."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()
        self.sizes: list[int] = []
        self.calls_from: set[str] = set()

    def __call__(self, fd: int) -> None:
        self.calls_from.add(threading.current_thread().name)
        if not self.entered.is_set():
            self.entered.set()
            assert self.release.wait(10)
        self.sizes.append(os.fstat(fd).st_size)


def test_writes_do_not_wait_for_fsync_and_close_waits_for_the_last(tmp_path, monkeypatch):
    fsync = _HeldFsync()
    monkeypatch.setattr(_results.os, "fsync", fsync)
    path = tmp_path / "results.jsonl"
    writer = ResultsWriter(path)
    writer.write(_record(0))
    assert fsync.entered.wait(10)  # the first fsync is under way, and held

    def more() -> None:
        for row in range(1, 21):
            writer.write(_record(row))

    writing = threading.Thread(target=more)
    writing.start()
    writing.join(10)
    assert not writing.is_alive(), "write waited for an fsync"
    # Flushed at once: a reader (or a run after a kill) sees every line before any fsync ended.
    assert [r["row"] for r in read_results(path)] == list(range(21))
    fsync.release.set()
    writer.close()
    assert fsync.sizes[-1] == path.stat().st_size  # the last fsync came after the last line
    assert len(fsync.sizes) <= 3  # one fsync covers the lines written during the one before
    assert threading.current_thread().name not in fsync.calls_from


def test_an_fsync_error_is_raised_by_the_next_write_or_close(tmp_path, monkeypatch):
    def failing(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(_results.os, "fsync", failing)
    writer = ResultsWriter(tmp_path / "results.jsonl")
    writer.write(_record(0))
    with pytest.raises(OSError, match="Input/output"):
        writer.close()
    writer.close()  # closed: a second close is a no-op


def test_without_sync_nothing_is_fsynced(tmp_path, monkeypatch):
    calls: list[int] = []
    monkeypatch.setattr(_results.os, "fsync", calls.append)
    with ResultsWriter(tmp_path / "replies.jsonl", sync=False) as writer:
        writer.write(_record(0))
    assert calls == []
    with ResultsWriter(tmp_path / "results.jsonl") as writer:
        writer.write(_record(0))
    assert calls  # and with sync, the close waited for one
