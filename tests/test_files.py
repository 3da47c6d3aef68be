"""Atomic writes: complete files only, with the permissions any other file of the user gets."""

from __future__ import annotations

import os
import stat

import pytest

from mrcr_gen._files import atomic_path, write_text_atomic


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
