from __future__ import annotations

import subprocess
import sys

import pytest

from mrcr_gen import iter_rows


def mrcr_gen(*args: str, cwd=None) -> subprocess.CompletedProcess:
    code = "from mrcr_gen.cli import gen_main; gen_main()"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=cwd, timeout=600)


def test_generates_prints_a_summary_and_writes_the_card(tmp_path):
    result = mrcr_gen("--needles", "2", "--needles", "3", "--bin", "8192", "--samples", "2", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "[4096, 8192]" in result.stdout and "median" in result.stdout
    assert len(list(iter_rows(tmp_path / "3needle" / "3needle_0.parquet"))) == 2
    assert "mrcr-gen --needles 2 --needles 3" in (tmp_path / "README.md").read_text()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--bin", "5000"], "no bin has upper edge 5000"),
        (["--bin", "big"], "--bin takes an upper edge or 'all'"),
        (["--shard", "3/2"], "K must be between 1 and N"),
        (["--shard", "x"], "--shard takes K/N"),
        (["--needles", "0"], "needle counts must be at least 1"),
        (["--samples", "0"], "--samples"),
        (["--writer", "nope"], "unknown writer"),
        (["--date-added", "2025-04-12"], "--date-added: '2025-04-12' is not a calendar date as MM-DD-YYYY"),
        (["--date-added", "02-30-2025"], "--date-added: '02-30-2025' is not a calendar date"),
        (["--tokens", "5000", "--bin", "8192"], "--tokens and --bin are exclusive"),
        (["--tokens", "4096"], "--tokens: 4096 gives rows of 4032..4096 tokens, outside the bins' 4096..1048576; choose 4160..1048576"),
        (["--tokens", "1048577"], "--tokens: 1048577 gives rows of 1038092..1048577 tokens"),
        (["--needles", "200", "--bin", "8192", "--samples", "1"], "cannot fit 200 needles"),
        (["--needles", "10000", "--bin", "8192"], "so 10000 needles take at least 60000 tokens"),
        (["--needles", "64", "--bin", "8192"], "cannot fit 64 needles of every ask into [4096, 8192]"),
        (["--frobnicate"], "No such option"),
    ],
)
def test_bad_options_get_one_line_and_exit_2(tmp_path, args, message):
    result = mrcr_gen(*args, "--out", str(tmp_path))
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.strip() and "generating" not in line]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("mrcr-gen: error: ") and message in lines[0]
    assert not list(tmp_path.rglob("*.parquet"))


def test_another_generation_into_the_same_out_is_exit_2_unless_overwrite(tmp_path):
    common = ("--needles", "2", "--bin", "8192", "--samples", "3", "--out", str(tmp_path))
    assert mrcr_gen(*common, "--rows-per-file", "1").returncode == 0
    refused = mrcr_gen(*common, "--rows-per-file", "3")
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines()[-1] == (
        f"mrcr-gen: error: {tmp_path} holds another generation (README.md: --rows-per-file 1 there, 3 here); "
        "add --overwrite to replace it (the files its card lists are removed), or choose another --out"
    )
    assert mrcr_gen(*common, "--rows-per-file", "3", "--overwrite").returncode == 0
    assert [p.name for p in tmp_path.rglob("*.parquet")] == ["2needle_0.parquet"]


def test_a_pair_whose_rows_lean_says_so(tmp_path):
    result = mrcr_gen("--needles", "8", "--bin", "8192", "--samples", "1", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "note: 8 needles in [4096, 8192]: with 'short scene in a play' needles" in " ".join(result.stderr.split())


def test_help_explains_the_options():
    result = mrcr_gen("--help")
    assert result.returncode == 0
    for option in ("--needles", "--bin", "--samples", "--seed", "--out", "--writer", "--tokens", "--shard"):
        assert option in result.stdout


def test_an_out_that_is_a_file_gets_one_line_and_exit_2(tmp_path):
    (tmp_path / "taken").write_text("")
    result = mrcr_gen("--bin", "8192", "--samples", "1", "--out", str(tmp_path / "taken"))
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.strip() and "generating" not in line]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("mrcr-gen: error: cannot write ") and "Not a directory" in lines[0]


def test_generation_does_not_import_the_openai_client():
    # It costs about a second to import, in the command and again in the workers' fork server.
    from mrcr_gen.recipes.openai_mrcr._generate import worker_preload

    modules = ", ".join(["mrcr_gen.cli", *worker_preload()])
    probe = f"import sys, {modules}; print('openai' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "False", done.stdout + done.stderr
