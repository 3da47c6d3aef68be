"""Worker processes import mrcr_gen from where their caller did, not from the current folder:
Python 3.11 ignores the `sys_path` it hands its fork server (a `python -c`, which looks in the
current folder first), so the modules it preloads for the generator's workers came from a
`mrcr_gen/` in the current folder, and every worker forked from it had that copy."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import mrcr_gen

PROBE = """
if __name__ == "__main__":
    from mrcr_gen.engines import LocalEngine

    engine = LocalEngine(workers=2, preload=("mrcr_gen.recipes.openai_mrcr._preload",))  # as mrcr-gen's
    print(list(engine.map(eval, [("__import__('mrcr_gen').__file__",)]))[0])
"""


@pytest.mark.skipif(
    sys.version_info < (3, 11) or not sys.platform.startswith("linux"), reason="PYTHONSAFEPATH (3.11+), fork server"
)
def test_workers_do_not_import_a_mrcr_gen_of_the_current_folder(tmp_path):
    folder = tmp_path / "folder"
    (folder / "mrcr_gen").mkdir(parents=True)
    (folder / "mrcr_gen" / "__init__.py").write_text("# another copy, e.g. an older checkout\n")
    script = tmp_path / "probe" / "probe.py"
    script.parent.mkdir()
    script.write_text(PROBE)
    real = Path(mrcr_gen.__file__).resolve().parent
    env = dict(os.environ, PYTHONPATH=str(real.parent))
    env.pop("PYTHONSAFEPATH", None)
    done = subprocess.run(
        [sys.executable, str(script)], cwd=folder, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    imported = Path(done.stdout.strip().splitlines()[-1]).resolve()
    assert imported.parent == real
