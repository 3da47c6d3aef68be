"""Issue 33 items 4 and 6: mrcr-gen never overwrites or deletes a file it did not write (both
recipes: one line naming the file, exit 2, nothing written, with or without --overwrite), a folder
whose card was removed is not regenerated with other options without --overwrite, and the writings
cache of an interrupted run is removed by the next run into the folder."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.processes import command_env, stop_while_running

#: One small generation per recipe, and the same with other options (its files have other names).
RECIPES = {
    "openai-mrcr": (("--bin", "8192", "--samples", "1", "--workers", "1"), "2needle/2needle_0.parquet"),
    "mrcr-v2": (
        ("--recipe", "mrcr-v2", "--bin", "8192", "--samples", "1", "--workers", "1"),
        "2needle/mrcr_v2_2needle_in_(4096,8192).csv",
    ),
}


def mrcr_gen(*args: str, patch: str = "") -> subprocess.CompletedProcess:
    code = f"{patch}from mrcr_gen.cli import gen_main; gen_main()"
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=600, env=command_env()
    )


def snapshot(folder: Path) -> dict[str, bytes | None]:
    """Every file's bytes and every folder (None), hidden ones included."""
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() if p.is_file() else None for p in sorted(folder.rglob("*"))
    }


def last_line(result: subprocess.CompletedProcess) -> str:
    return result.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("recipe", RECIPES)
@pytest.mark.parametrize("where", ["README.md", "data", "sidecar"])
def test_a_file_we_did_not_write_is_refused_with_or_without_overwrite(tmp_path, recipe, where):
    """The openai/mrcr download kept in the --out folder (its README.md, a data file of the same
    name, or a stray file with a sidecar's name): one line naming it, exit 2, the folder as it was."""
    args, data = RECIPES[recipe]
    name = {"README.md": "README.md", "data": data, "sidecar": data.rsplit(".", 1)[0] + ".samples.jsonl"}[where]
    (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / name).write_text("not ours\n")
    before = snapshot(tmp_path)
    for extra in ((), ("--overwrite",)):
        result = mrcr_gen(*args, "--needles", "2", "--out", str(tmp_path), *extra)
        assert result.returncode == 2, result.stderr
        assert result.stderr.strip() == (  # before any work: no note, no progress bar, the error alone
            f"mrcr-gen: error: refusing to overwrite {tmp_path / name}: mrcr-gen did not write it; "
            "move it away or choose another --out (--overwrite replaces only our files)"
        )
        assert snapshot(tmp_path) == before


@pytest.mark.parametrize("recipe", RECIPES)
def test_a_folder_whose_card_was_removed_needs_overwrite_for_other_options_and_keeps_foreign_files(tmp_path, recipe):
    args, data = RECIPES[recipe]
    assert mrcr_gen(*args, "--needles", "2", "--out", str(tmp_path)).returncode == 0
    (tmp_path / "README.md").unlink()
    (tmp_path / "notes.txt").write_text("mine\n")
    (tmp_path / "2needle" / "mine.parquet").write_text("mine too\n")
    before = snapshot(tmp_path)
    # The same options: the files are this generation's, so they are kept and the card comes back.
    assert mrcr_gen(*args, "--needles", "2", "--out", str(tmp_path)).returncode == 0
    assert {k: v for k, v in snapshot(tmp_path).items() if k != "README.md"} == before
    (tmp_path / "README.md").unlink()
    other = (*args, "--needles", "2", "--seed", "7", "--out", str(tmp_path))
    refused = mrcr_gen(*other)
    assert refused.returncode == 2
    assert last_line(refused) == (
        f"mrcr-gen: error: {tmp_path} holds {data}, written by mrcr-gen with other options, and no card "
        "that lists it (README.md was removed?); add --overwrite to replace it, or choose another --out"
    )
    assert snapshot(tmp_path) == before
    assert mrcr_gen(*other, "--overwrite").returncode == 0
    after = snapshot(tmp_path)
    assert after["notes.txt"] == b"mine\n" and after["2needle/mine.parquet"] == b"mine too\n"
    assert after[data] != before[data] and '"seed": 7' in after["README.md"].decode()


@pytest.mark.parametrize("recipe", RECIPES)
def test_overwrite_of_another_generation_removes_nothing_when_a_new_file_is_foreign(tmp_path, recipe):
    """--overwrite of a generation whose card lists other files: refused as a whole (its files stay)
    when one of the new files' names is taken by a file we did not write."""
    args, data = RECIPES[recipe]
    assert mrcr_gen(*args, "--needles", "2", "--out", str(tmp_path)).returncode == 0
    foreign = tmp_path / data.replace("2needle", "4needle")
    foreign.parent.mkdir()
    foreign.write_text("not ours\n")
    before = snapshot(tmp_path)
    result = mrcr_gen(*args, "--needles", "4", "--out", str(tmp_path), "--overwrite")
    assert result.returncode == 2 and str(foreign) in last_line(result)
    assert snapshot(tmp_path) == before


#: Any job shares its writings (the offline writer's, composed once into `.writings-<key>/`).
SHARE_ALWAYS = "import mrcr_gen.generate._share as s; s.PAIR_TOKENS = 1; "
SHARING_JOB = ("--bin", "16384", "--samples", "6", "--rows-per-file", "1", "--workers", "2")


@pytest.mark.slow
@pytest.mark.parametrize(
    "rerun",
    [{"--workers": "1"}, {"--bin": "8192", "--samples": "1", "--workers": "1", "--overwrite": None}],
    ids=["same-options-no-sharing", "other-options-overwrite"],
)
def test_the_writings_cache_of_a_killed_run_is_removed_by_the_next_run(tmp_path, rerun):
    """Killed (SIGKILL) while its cache is being composed; the next run into the folder removes it,
    whether it resumes without sharing or replaces the generation with other options."""
    out = tmp_path / "out"
    args = [sys.executable, "-c", f"{SHARE_ALWAYS}from mrcr_gen.cli import gen_main; gen_main()", "-o", str(out)]
    stop_while_running([*args, *SHARING_JOB], out, signal.SIGKILL, lambda _: any(out.glob(".writings-*/*.arrow")))
    assert list(out.glob(".writings-*"))
    options = dict(zip(SHARING_JOB[::2], SHARING_JOB[1::2], strict=True)) | rerun
    result = mrcr_gen("-o", str(out), *[x for k, v in options.items() for x in (k, v) if x is not None])
    assert result.returncode == 0, result.stderr
    assert not list(out.glob(".writings-*"))
    assert not (out / "README.md").read_text().count("Being generated")
