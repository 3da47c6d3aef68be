"""A killed MRCR v2 run leaves temporary files; the next run of the command removes them, as
openai/mrcr's does (`mrcr_gen._files.remove_partials`)."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from mrcr_gen.recipes.mrcr_v2 import V2Config, V2OfflineWriter, generate_v2, v2_bucket
from tests.support.processes import cli, command_env, stop_while_running


def partials(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if p.name.endswith(".partial"))


def test_a_rerun_removes_what_a_killed_run_left(tmp_path: Path) -> None:
    config = V2Config(needles=(2,), buckets=(v2_bucket(8192),), samples=2, seed=4, out=tmp_path)
    data = tmp_path / config.files()[0][3]
    data.parent.mkdir(parents=True)
    left = [  # as a process killed while writing them leaves them
        data.with_name(f".{data.name}.0123456789ab.partial"),
        data.with_name(".mrcr_v2_2needle_in_(4096,8192).samples.jsonl.ba9876543210.partial"),
        tmp_path / ".README.md.00aa11bb22cc.partial",
    ]
    for path in left:
        path.write_text("half a file")
    unrelated = tmp_path / ".notes.txt.0123456789ab.partial"  # not a file of this dataset
    unrelated.write_text("someone else's")
    generate_v2(config, V2OfflineWriter(4))
    assert partials(tmp_path) == [unrelated.name]
    assert data.is_file()


@pytest.mark.slow
def test_kill_9_mid_file_then_a_rerun_leaves_no_partial_file(tmp_path: Path) -> None:
    out = tmp_path / "out"
    job = cli("mrcr-gen", "--recipe", "mrcr-v2", "-n", "2", "-b", "131072", "-s", "48", "-o", str(out))

    def mid_file(_) -> bool:  # the CSV's temporary file has its first row (the header is written at once)
        return out.is_dir() and any(p.stat().st_size > 1000 for p in out.rglob("*.partial"))

    stopped = stop_while_running(job, out, signal.SIGKILL, mid_file)
    assert stopped.returncode == -signal.SIGKILL and stopped.left == []
    assert len(partials(out)) == 1  # what the rerun must clear
    subprocess.run(job, env=command_env(), check=True, capture_output=True)
    assert partials(out) == []
    assert [p.name for p in out.rglob("*.csv")] == ["mrcr_v2_2needle_in_(65536,131072).csv"]
