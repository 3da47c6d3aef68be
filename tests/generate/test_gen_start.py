"""`mrcr-gen` starts its workers' fork server before it parses its options (`start_workers_early`)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mrcr_gen.cli._gen_start import peek


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], {}),
        (["--needles", "8", "--bin", "1048576"], {}),
        (["--recipe", "mrcr-v2", "--tokens", "1048576"], {"recipe": "mrcr-v2"}),
        (
            ["--recipe=mrcr-v2", "-w", "4", "--tokenizer=hf:x"],
            {"recipe": "mrcr-v2", "workers": "4", "tokenizer": "hf:x"},
        ),
        (["--engine", "ray", "--workers", "1"], {"engine": "ray", "workers": "1"}),
        (["--needles", "8", "--help"], None),
        (["-h"], None),
        (["pool", "build", "--workers", "2"], None),
        (["--show-completion"], None),
        (["--needles", "8", "--workers"], None),  # its value missing: typer says so, nothing is started
    ],
)
def test_the_options_that_decide_the_workers_are_read_from_argv(argv, expected):
    assert peek(argv) == expected


START = """
import multiprocessing.forkserver as fs, sys
from mrcr_gen.cli._gen_start import start_workers_early
start_workers_early(sys.argv[1:])
running = fs._forkserver._forkserver_pid is not None
print(running, "typer" in sys.modules, "pyarrow" in sys.modules)
"""


@pytest.mark.parametrize(
    ("argv", "started"),
    [
        (["--needles", "8", "--workers", "2"], True),
        (["--needles", "8", "--workers", "1"], False),  # one worker: units run in the command's process
        (["--engine", "ray", "--workers", "2"], False),
        (["--recipe", "no-such-recipe", "--workers", "2"], False),  # the command refuses it itself
        (["--recipe", "mrcr-v2", "--workers", "2"], False),  # a one-file job runs in the command's process
        (["--workers", "two"], False),
        (["--help"], False),
    ],
)
def test_the_fork_server_starts_before_the_command_imports_its_options(argv, started):
    """Started before typer (and pyarrow) are imported: the server imports the workers' modules on
    another core while the command starts. Where no local pool would run, nothing is started."""
    if not sys.platform.startswith("linux"):
        pytest.skip("fork servers are Linux-only here")
    out = subprocess.run([sys.executable, "-c", START, *argv], capture_output=True, text=True, check=True).stdout
    assert out.split() == [str(started), "False", "False"]
