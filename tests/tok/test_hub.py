"""hf:// data paths and hf:ORG/NAME tokenizers through huggingface_hub, against a fake Hub on
127.0.0.1 (HF_ENDPOINT), then offline (HF_HUB_OFFLINE=1) from the cache it filled.

The commands run as subprocesses: huggingface_hub reads HF_ENDPOINT and HF_HUB_OFFLINE on import."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support.chat_server import ChatServer, oracle
from tests.support.hub_server import FakeHub

MAINS = {
    "mrcr-validate": "from mrcr_gen.cli import validate_main as m; m()",
    "mrcr-eval": "from mrcr_gen.cli import eval_main as m; m()",
    "mrcr-gen": "from mrcr_gen.cli import gen_main as m; m()",
    "mrcr-grade": "from mrcr_gen.cli import grade_main as m; m()",
}


@pytest.fixture(scope="module")
def hub(tiny_data, tiny_dir, tmp_path_factory):
    """org/mrcr: commit `old` (2needle only), then `main` (2 and 4 needles, the card); org/tiny: a tokenizer."""
    files = {str(p.relative_to(tiny_data)): p.read_bytes() for p in tiny_data.rglob("*") if p.is_file()}
    fake = FakeHub()
    fake.old = fake.add_commit("datasets", "org/mrcr", {k: v for k, v in files.items() if k.startswith("2needle/")})
    fake.main = fake.add_commit("datasets", "org/mrcr", files)
    fake.add_commit("models", "org/tiny", {n: (tiny_dir / n).read_bytes() for n in ("tokenizer.json", "tokenizer_config.json")})
    fake.home = tmp_path_factory.mktemp("hf-home")
    with fake:
        yield fake


def run(hub, command, *args, offline=False, cwd=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_"))}
    env |= {"HF_ENDPOINT": hub.url, "HF_HOME": str(hub.home), "HF_HUB_DISABLE_TELEMETRY": "1", "OPENAI_API_KEY": "sk-hub-test"}
    if offline:
        env["HF_HUB_OFFLINE"] = "1"
    return subprocess.run([sys.executable, "-c", MAINS[command], *map(str, args)], capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


def test_validate_hub_glob_records_the_resolved_revision_then_works_offline(hub, tiny_spec):
    done = run(hub, "mrcr-validate", "hf://datasets/org/mrcr/*needle/*.parquet", "--json", "-", "--workers", "1")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)["summary"]
    assert summary["rows"] == 6
    assert sorted(summary["hub_sources"].values()) == [
        f"hf://datasets/org/mrcr@{hub.main}/2needle/2needle_0.parquet",
        f"hf://datasets/org/mrcr@{hub.main}/4needle/4needle_0.parquet",
    ]
    assert set(summary["tokenizers"].values()) == {tiny_spec}  # the downloaded card names it
    before = sum(hub.requests.values())
    offline = run(hub, "mrcr-validate", "hf://datasets/org/mrcr/*needle/*.parquet", "--json", "-", "--workers", "1", offline=True)
    assert offline.returncode == 0, offline.stderr
    assert json.loads(offline.stdout)["summary"]["hub_sources"] == summary["hub_sources"]
    assert sum(hub.requests.values()) == before  # served from the cache alone


def test_pinned_revision(hub):
    done = run(hub, "mrcr-validate", f"hf://datasets/org/mrcr@{hub.old}/2needle", "--json", "-", "--no-tokens")
    assert done.returncode == 0, done.stderr
    assert list(json.loads(done.stdout)["summary"]["hub_sources"].values()) == [
        f"hf://datasets/org/mrcr@{hub.old}/2needle/2needle_0.parquet"
    ]
    missing = run(hub, "mrcr-validate", f"hf://datasets/org/mrcr@{hub.old}/4needle/*.parquet", "--no-tokens")
    assert missing.returncode == 2 and "glob matches no file in the downloaded repository" in missing.stderr


@pytest.mark.parametrize(
    "path, offline, message",
    [
        ("hf://datasets/org/absent/x.parquet", False, "RepositoryNotFoundError"),
        ("hf://datasets/org/absent/x.parquet", True, "cannot get it from the Hub or its cache"),
        ("hf://datasets/org", False, "expected hf://datasets/ORG/NAME"),
    ],
)
def test_unresolvable_paths_are_one_line_exit_2(hub, path, offline, message):
    done = run(hub, "mrcr-validate", path, offline=offline)
    assert done.returncode == 2 and message in done.stderr
    assert [line for line in done.stderr.splitlines() if "error" in line] == [done.stderr.strip().splitlines()[-1]]


def test_eval_grade_and_harvest_read_hub_paths(hub, tmp_path):
    path = "hf://datasets/org/mrcr/2needle/2needle_0.parquet"
    pinned = f"hf://datasets/org/mrcr@{hub.main}/2needle/2needle_0.parquet"
    with ChatServer("oracle") as server:
        done = run(hub, "mrcr-eval", path, "--model", "m", "--base-url", server.base_url, "--out", tmp_path / "run", "-q")
        assert done.returncode == 0, done.stderr
        assert server.total_requests == 3
        bodies = list(server.requests)
    assert list(json.loads((tmp_path / "run" / "run.json").read_text())["hub_sources"].values()) == [pinned]
    responses = tmp_path / "responses.jsonl"
    responses.write_text("".join(json.dumps({"row": i, "response": oracle(b["messages"], b)}) + "\n" for i, b in enumerate(bodies)))
    graded = run(hub, "mrcr-grade", path, responses, "--json", "--allow-missing")
    assert graded.returncode == 0, graded.stderr
    assert json.loads(graded.stdout)["n_rows"] == 3
    harvested = run(hub, "mrcr-gen", "pool", "harvest", path, "--out", tmp_path / "pool.parquet")
    assert harvested.returncode == 0, harvested.stderr
    assert list(json.loads((tmp_path / "pool.catalog.json").read_text())["hub_sources"].values()) == [pinned]


def test_hub_tokenizer_cached_then_offline(hub, tiny_spec, tmp_path):
    args = ["--needles", "2", "--bin", "16384", "--samples", "1", "--out"]
    online = run(hub, "mrcr-gen", *args, tmp_path / "a", "--tokenizer", "hf:org/tiny")
    assert online.returncode == 0, online.stderr
    offline = run(hub, "mrcr-gen", *args, tmp_path / "b", "--tokenizer", "hf:org/tiny", offline=True)
    assert offline.returncode == 0, offline.stderr
    local = run(hub, "mrcr-gen", *args, tmp_path / "c", "--tokenizer", tiny_spec, offline=True)
    assert local.returncode == 0, local.stderr
    parquet = "2needle/2needle_0.parquet"
    assert (tmp_path / "a" / parquet).read_bytes() == (tmp_path / "b" / parquet).read_bytes() == (tmp_path / "c" / parquet).read_bytes()
    card = (tmp_path / "b" / "README.md").read_text()
    assert '  tokenizer: "hf:org/tiny"' in card and "tokenizer_revision" in card
    unknown = run(hub, "mrcr-gen", *args, tmp_path / "d", "--tokenizer", "hf:org/unknown", offline=True)
    assert unknown.returncode == 2 and unknown.stderr.startswith("mrcr-gen: error: --tokenizer: hf:org/unknown: cannot get tokenizer.json")
