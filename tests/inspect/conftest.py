"""Fixtures for the Inspect tests: small openai/mrcr and MRCR v2 data, and `inspect eval` run as users run it."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from mrcr_gen import write_rows
from mrcr_gen.recipes.mrcr_v2 import V2Config, V2OfflineWriter, generate_v2, v2_bucket
from tests.eval.conftest import generated_rows, handmade_row

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def mrcr_data(tmp_path_factory) -> Path:
    """12 handmade rows under 4096 tokens and 6 generated rows in (4096, 8192]: two bins."""
    folder = tmp_path_factory.mktemp("inspect-data")
    write_rows([handmade_row(n, seed) for seed in range(4) for n in (2, 4, 8)], folder / "a_small.parquet")
    write_rows(generated_rows([(n, seed) for n in (2, 4, 8) for seed in (11, 12)]), folder / "b_gen.parquet")
    return folder


@pytest.fixture(scope="session")
def v2_data(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("inspect-v2") / "data"
    config = V2Config(needles=(2, 4), buckets=(v2_bucket(8192),), samples=3, rows_per_transcript=3, seed=5, out=out)
    generate_v2(config, V2OfflineWriter(5))
    return out


@pytest.fixture(scope="session")
def inspect_env(tmp_path_factory) -> dict[str, str]:
    """The environment of an `inspect eval` subprocess that finds this checkout's tasks: an
    installed mrcr-gen declares the `inspect_ai` entry point in pyproject.toml; a checkout run
    from PYTHONPATH gets the same declaration from a dist-info folder on the path."""
    paths = [str(ROOT)]
    declared = any(ep.name == "mrcr_gen" and ep.value == "mrcr_gen.inspect._tasks" for ep in entry_points(group="inspect_ai"))
    if not declared:
        info = tmp_path_factory.mktemp("ep") / "mrcr_gen_inspect_checkout-0.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mrcr-gen-inspect-checkout\nVersion: 0.0\n")
        (info / "entry_points.txt").write_text("[inspect_ai]\nmrcr_gen = mrcr_gen.inspect._tasks\n")
        paths.append(str(info.parent))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*paths, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["INSPECT_DISPLAY"] = "none"
    return env


def inspect_cli(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    """`inspect ...` as a user runs it (the console script beside this Python)."""
    script = Path(sys.executable).with_name("inspect")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "inspect_ai._cli.main"]
    return subprocess.run([*command, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=600)
