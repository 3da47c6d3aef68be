"""MRCR v2 through the core pipeline: the same bytes whatever the engine's worker count and however
the files are sharded; sidecars beside every file; the recipe in generated parquet's metadata;
options the recipe does not declare refused."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from mrcr_gen.engines import LocalEngine
from mrcr_gen.recipes.mrcr_v2 import V2Config, V2OfflineWriter, generate_v2, v2_bucket


def config(out: Path, **changes) -> V2Config:
    settings = {
        "needles": (2, 4),
        "buckets": (v2_bucket(8192), v2_bucket(16384)),
        "samples": 3,
        "rows_per_transcript": 2,
        "seed": 9,
        "out": out,
        "format": "parquet",
    } | changes
    return V2Config(**settings)


def data_digests(root: Path) -> dict[str, str]:
    """Every file but the cards (they name the shard and the command)."""
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.startswith("README")
    }


@pytest.mark.parametrize("file_format", ["csv", "parquet"])
def test_worker_counts_and_shards_give_the_same_files(tmp_path, file_format):
    one = config(tmp_path / "one", format=file_format)
    generate_v2(one, V2OfflineWriter(9), engine=LocalEngine(1))
    with LocalEngine(2) as engine:
        generate_v2(config(tmp_path / "two", format=file_format), V2OfflineWriter(9), engine=engine)
    for k in (1, 2):
        generate_v2(config(tmp_path / "shards", format=file_format, shard=(k, 2)), V2OfflineWriter(9))
    expected = data_digests(one.out)
    assert len(expected) == 8  # four files and their sidecars
    assert data_digests(tmp_path / "two") == expected
    assert data_digests(tmp_path / "shards") == expected


def test_every_file_has_a_sidecar_with_a_record_per_row(tmp_path):
    cfg = config(tmp_path, needles=(2,), buckets=(v2_bucket(8192),))
    [summary] = generate_v2(cfg, V2OfflineWriter(9), engine=LocalEngine(1))
    data = tmp_path / summary["file"]
    records = [json.loads(line) for line in data.with_name(data.stem + ".samples.jsonl").read_text().splitlines()]
    table = pq.read_table(data)
    assert len(records) == table.num_rows == 3
    assert [r["n_tokens"] for r in records] == table.column("context_len").to_pylist()
    assert {r["bin"] for r in records} == {"(4096, 8192]"} and {r["n_needles"] for r in records} == {2}
    assert {r["tokenizer"] for r in records} == {"o200k_base"} and len({r["build"] for r in records}) == 1
    assert all(isinstance(r["transcript"], int) for r in records)
    assert not list(tmp_path.rglob("*.build.json"))


def test_generated_parquet_names_its_recipe(tmp_path):
    cfg = config(tmp_path, needles=(2,), buckets=(v2_bucket(8192),), samples=1)
    [summary] = generate_v2(cfg, V2OfflineWriter(9), engine=LocalEngine(1))
    metadata = pq.ParquetFile(tmp_path / summary["file"]).metadata.metadata
    assert json.loads(metadata[b"mrcr_gen"])["recipe"] == "mrcr-v2"
    assert json.loads(metadata[b"mrcr_gen"])["recipe_version"] == "1"


def mrcr_gen(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    code = "from mrcr_gen.cli import gen_main; gen_main()"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=cwd, timeout=600)


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--recipe", "mrcr-v2", "--date-added", "01-02-2025"], "--date-added"),
        (["--recipe", "mrcr-v2", "--price-in", "1"], "--price-in"),
        (["--recipe", "mrcr-v2", "--rows-per-file", "3"], "--rows-per-file"),
        (["--format", "parquet"], "--format"),
        (["--rows-per-transcript", "2"], "--rows-per-transcript"),
    ],
)
def test_an_option_the_recipe_does_not_declare_is_refused_in_one_line(tmp_path, args, flag):
    result = mrcr_gen(*args, "--samples", "1", "--bin", "8192", "--out", "out", cwd=tmp_path)
    recipe = "mrcr-v2" if "mrcr-v2" in args else "openai-mrcr"
    assert result.returncode == 2
    # (a recipe plugin installed beside mrcr-gen may add a warning line of its own)
    errors = [line for line in result.stderr.splitlines() if not line.startswith("mrcr-gen: warning:")]
    assert errors == [f"mrcr-gen: error: {flag} is not an option of --recipe {recipe}"]
    assert not (tmp_path / "out").exists()


def test_the_command_runs_v2_on_the_engine_it_is_given(tmp_path):
    common = ["--recipe", "mrcr-v2", "-n", "2", "-b", "8192", "-b", "16384", "-s", "2", "--format", "parquet"]
    for name, extra in (("w1", ["--workers", "1"]), ("w2", ["--workers", "2"])):
        result = mrcr_gen(*common, *extra, "--out", name, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
    assert data_digests(tmp_path / "w1") == data_digests(tmp_path / "w2") and data_digests(tmp_path / "w1")
