"""Issue 36: how soon `mrcr-gen`'s workers begin composing, and the CPU of its whole process tree.

    python bench/bench_worker_start.py --rounds 6                          # this checkout
    python bench/bench_worker_start.py --code /tmp/main-checkout --code .  # before and after, alternated

Each run is the bench's gen job (`--needles 8 --bin 1048576 --samples 100 --seed 1`, or the options
after `--`) in a fresh output folder. A `sitecustomize` put first on the path of that run only logs,
in every process: when it started, and when a worker began its first unit of each kind (the check,
`compose_shared`, `write_chunk`). Reported per checkout, median over the rounds: when the fork server
had preloaded (forked its first worker), worker 1 and worker 2 began composing (their first unit after
the check), the wall time, and the user+sys CPU of every process of the run (this script makes itself
a child subreaper, so the fork server and workers are waited for and counted). Run on an idle
machine: with other work on the cores, a start that runs things in parallel gains nothing.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
JOB = ["--needles", "8", "--bin", "1048576", "--samples", "100", "--seed", "1"]
ENTRY = "import sys; from mrcr_gen.cli import gen_main; sys.argv[0] = 'mrcr-gen'; gen_main()"
PR_SET_CHILD_SUBREAPER = 36

SITE = """
import functools, os, sys, time
T0 = float(os.environ["MRCR_START_T0"])
def _log(message):
    sys.stderr.write(f"@@ {time.time() - T0:.4f} {os.getpid()} {message}\\n")
    sys.stderr.flush()
_log("start")
def _hook():
    local = sys.modules.get("mrcr_gen.engines._local")
    if local is None or not hasattr(local, "_run_unit") or getattr(local._run_unit, "_timed", False):
        return local is not None and hasattr(local, "_run_unit")
    run, seen = local._run_unit, set()
    @functools.wraps(run)  # pickled by its name, as the function it stands for
    def timed(fn, *args):
        name = getattr(fn, "__name__", "check")
        if name not in seen:
            seen.add(name)
            _log("unit " + name)
        return run(fn, *args)
    timed._timed = True
    local._run_unit = timed
    return True
import builtins
_import = builtins.__import__
def _watch(*args, **kwargs):
    module = _import(*args, **kwargs)
    if _hook():
        builtins.__import__ = _import
    return module
builtins.__import__ = _watch
"""


def one_run(code: Path, site: Path, out: Path, job: list[str]) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.time()
    env = dict(os.environ, PYTHONPATH=f"{site}{os.pathsep}{code}", MRCR_START_T0=repr(t0))
    command = [sys.executable, "-c", ENTRY, *job, "--out", str(out)]
    # In the scratch folder: `python -c` looks for modules in its current folder first.
    done = subprocess.run(command, env=env, cwd=out.parent, capture_output=True, text=True)
    wall = time.time() - t0
    while True:  # the fork server and the workers, reparented here
        try:
            os.wait()
        except ChildProcessError:
            break
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(f"{code}: mrcr-gen failed:\n{done.stderr[-2000:]}")
    units: dict[str, dict[str, float]] = {}
    for seconds, pid, name in re.findall(r"^@@ ([\d.]+) (\d+) unit (\S+)", done.stderr, re.M):
        units.setdefault(pid, {}).setdefault(name, float(seconds))
    checks = [u.pop("check") for u in units.values() if "check" in u] or [float("nan")]
    composing = sorted(min(u.values()) for u in units.values() if u)
    return {
        "preloaded": min(checks),
        "worker 1": composing[0] if composing else float("nan"),
        "worker 2": composing[1] if len(composing) > 1 else float("nan"),
        "wall": wall,
        "tree cpu": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--code", type=Path, action="append", help="a checkout whose mrcr_gen to run (repeatable)")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("job", nargs="*", help="mrcr-gen options after --, instead of the gen job's")
    args = parser.parse_args()
    codes = [c.resolve() for c in (args.code or [ROOT])]
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 1)
    runs: dict[Path, list[dict]] = {code: [] for code in codes}
    with tempfile.TemporaryDirectory() as scratch:
        site = Path(scratch, "site")
        site.mkdir()
        (site / "sitecustomize.py").write_text(SITE)
        for round_ in range(args.rounds):
            for code in codes if round_ % 2 == 0 else codes[::-1]:  # alternated: a drift hits both
                found = one_run(code, site, Path(scratch, "out"), args.job or JOB)
                runs[code].append(found)
                print(f"  {code}: " + "  ".join(f"{k} {v:.3f}" for k, v in found.items()), flush=True)
    for code, found in runs.items():
        medians = {key: statistics.median(run[key] for run in found) for key in found[0]}
        print(f"{code} (median of {len(found)}): " + "  ".join(f"{k} {v:.3f} s" for k, v in medians.items()))


if __name__ == "__main__":
    main()
