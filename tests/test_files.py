"""Atomic writes: complete files only, with the permissions any other file of the user gets."""

from __future__ import annotations

import os
import stat

import pytest

from mrcr_gen._files import atomic_path, remove_partials, write_text_atomic


@pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")
def test_written_files_follow_the_umask_not_mkstemps_0600(tmp_path):
    old = os.umask(0o022)
    try:
        write_text_atomic(tmp_path / "card.md", "hello")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "card.md").stat().st_mode) == 0o644


def test_a_failed_block_leaves_neither_target_nor_temporary_file(tmp_path):
    with pytest.raises(RuntimeError), atomic_path(tmp_path / "x.parquet") as tmp:
        tmp.write_text("half")
        raise RuntimeError("interrupted")
    assert list(tmp_path.iterdir()) == []


def test_what_a_dead_writer_left_is_removed_and_nothing_else(tmp_path):
    import subprocess
    import sys

    # A writer killed in its block: its temporary file stays, as after `kill -9`.
    script = (
        "import os, sys; from mrcr_gen._files import atomic_path\n"
        "with atomic_path(sys.argv[1]) as tmp:\n    tmp.write_text('half'); os._exit(1)\n"
    )
    subprocess.run([sys.executable, "-c", script, str(tmp_path / "a[1].parquet")], check=False)
    write_text_atomic(tmp_path / "a[1].parquet.samples.jsonl", "kept")
    (tmp_path / ".b.parquet.0123456789ab.partial").write_text("another file's")
    assert len(list(tmp_path.glob(".a[[]1].parquet.*.partial"))) == 1
    remove_partials(tmp_path / "a[1].parquet")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".b.parquet.0123456789ab.partial", "a[1].parquet.samples.jsonl"]


def test_early_writeback_syncs_in_the_background_and_raises_what_a_sync_met(tmp_path, monkeypatch):
    import threading

    from mrcr_gen import _files

    synced: list[tuple[int, str]] = []
    real = getattr(os, "fdatasync", os.fsync)

    def recording(fileno: int) -> None:
        synced.append((fileno, threading.current_thread().name))
        real(fileno)

    monkeypatch.setattr(os, "fdatasync" if hasattr(os, "fdatasync") else "fsync", recording)
    with open(tmp_path / "growing", "wb", buffering=0) as file:
        fileno = file.fileno()
        writeback = _files.EarlyWriteback(fileno)
        for _ in range(3):
            file.write(b"x" * 4096)
            writeback.nudge()
        writeback.wait()
    assert synced and all(synced_fd == fileno and name.startswith("mrcr-writeback") for synced_fd, name in synced)
    closed = os.open(tmp_path / "growing", os.O_RDONLY)
    os.close(closed)
    failing = _files.EarlyWriteback(closed)  # a descriptor no longer open: the sync fails
    failing.nudge()
    with pytest.raises(OSError):
        failing.wait()
