"""A command's start imports only what it uses: `--help` of `mrcr-gen`, `mrcr-validate` and
`mrcr-eval` (every installed recipe registered, as the commands load them) never imports the
data, tokenizer or client libraries (`bench/bench_command_start.py` times it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Each costs tens to hundreds of milliseconds to import; a command needs them only to work.
HEAVY = ("pyarrow", "pandas", "numpy", "tiktoken", "openai", "httpx", "matplotlib", "tokenizers", "inspect_ai")

PROBE = """
import contextlib, io, json, sys
from mrcr_gen import cli
command, heavy = sys.argv[1], json.loads(sys.argv[2])
with contextlib.redirect_stdout(io.StringIO()) as shown:
    try:
        if command == "mrcr-validate":
            sys.argv = [command, "--help"]
            cli.validate_main()
        else:
            {"mrcr-gen": cli.gen_main, "mrcr-eval": cli.eval_main}[command](["--help"])
    except SystemExit as done:
        code = done.code
print(json.dumps({"code": code, "help": shown.getvalue(), "loaded": [m for m in heavy if m in sys.modules]}))
"""


@pytest.mark.parametrize("command", ["mrcr-gen", "mrcr-validate", "mrcr-eval"])
def test_help_imports_no_heavy_library(command):
    # This checkout first, and its recipe plugin (the README's tests install it, maybe from elsewhere).
    path = [str(ROOT), str(ROOT / "tests" / "recipe_plugin"), os.environ.get("PYTHONPATH", "")]
    env = os.environ | {"PYTHONPATH": os.pathsep.join(path)}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, command, json.dumps(HEAVY)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["code"] in (0, None) and "--help" in found["help"] and "Usage" in found["help"]
    assert found["loaded"] == [], f"{command} --help imported {found['loaded']}"


def test_every_name_the_package_loads_on_first_use_is_exported_and_resolves():
    import mrcr_gen

    assert set(mrcr_gen.__all__) == {"__version__", *mrcr_gen._LAZY}
    for name in mrcr_gen.__all__:
        assert getattr(mrcr_gen, name) is not None, name
