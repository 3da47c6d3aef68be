"""One `mrcr-gen pool build` per pool file: a second build of the same pool would ask (and pay) for
the same writings; it is refused in one line naming the running build."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mrcr_gen.cli import gen_main
from mrcr_gen.recipes.openai_mrcr._pool_llm import plan_asks
from tests.support.chat_server import ChatServer

from .writer_server import writer_policy

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-pool-lock")


def build_args(server: ChatServer, tmp_path: Path) -> list[str]:
    return [
        "pool", "build", "--writer", "openai", "--model", "test-model", "--base-url", server.base_url,
        "--formats", "poem", "--entities", "6", "--needle-asks", "1", "--needle-variants", "2", "--concurrency", "1",
        "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "pool.parquet"),
    ]  # fmt: skip


def test_a_second_build_of_one_pool_exits_2_naming_the_first_and_sends_nothing(tmp_path, capsys):
    with ChatServer(writer_policy, delay=0.5) as server:
        args = build_args(server, tmp_path)
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        first = subprocess.Popen(
            [sys.executable, "-c", "from mrcr_gen.cli import gen_main; gen_main()", *args],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 60
            while server.total_requests == 0 and time.monotonic() < deadline:
                time.sleep(0.02)
            with pytest.raises(SystemExit) as info:
                gen_main(args)
            err = capsys.readouterr().err
            assert info.value.code == 2 and len(err.strip().splitlines()) == 1, err
            assert f"the pool {tmp_path / 'pool.parquet'} is in use by another run (pid {first.pid} on " in err
            assert first.wait(timeout=120) == 0
        finally:
            if first.poll() is None:
                first.kill()
                first.wait()
        asked = server.per_last_user
    plan = plan_asks(formats=["poem"], entities=6, needle_asks=1, needle_variants=2)
    assert asked == {ask.text: n for ask, n in plan.items()}  # each writing was asked for once
    assert (tmp_path / "pool.parquet").is_file()


@pytest.mark.parametrize("name", ["pool.parquet", "pool.build.json", "pool.lock"])
def test_a_build_over_a_file_we_did_not_write_exits_2_and_sends_nothing(tmp_path, capsys, name):
    """Issue 33 item 4: someone's pool.parquet (or its build report or lock, beside no pool of ours)."""
    foreign = tmp_path / name
    foreign.write_text("not ours\n")
    with ChatServer(writer_policy) as server:
        with pytest.raises(SystemExit) as info:
            gen_main(build_args(server, tmp_path))
        assert server.total_requests == 0
    err = capsys.readouterr().err
    assert info.value.code == 2
    assert err == (
        f"mrcr-gen: error: refusing to overwrite {foreign}: mrcr-gen did not write it; "
        "move it away or choose another --out\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]
