"""Issue 36, MRCR v2 generation by stage: where `mrcr-gen --recipe mrcr-v2` spends its CPU and takes
fresh memory, for this checkout and another (`--code`, before), in alternating fresh processes.

    python bench/bench_v2_stages.py --code /tmp/before      # git archive main mrcr_gen entities formats
    python bench/bench_v2_stages.py --rounds 5 --rows 16 --tokens 1048576

Each run is the command as `bench_counts_once.py --jobs v2` runs it (a fresh folder and count cache),
with marks at the ends of its stages: imports; the few-shot block of the first transcript (o200k built
on its first count); each transcript built; the rows written; the sidecar sealed (the file's sha256);
the exit handlers. Per stage: the process's CPU seconds (every thread: the tokenizer threads count
while a transcript is built) and its minor page faults (fresh memory, dear on some VMs), medians over
the rounds. Also the wall time and the CPU of the whole process tree (psutil, sampled), medians.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent

#: Run in the measured process: marks at the stages' ends, printed to stderr by an exit handler.
PROBE = r"""
import atexit, resource, sys, time
marks = []
def mark(name):
    marks.append((name, resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.process_time()))
mark("start")
from mrcr_gen.recipes.mrcr_v2 import _assembler, _rows
import mrcr_gen.cli._gen, mrcr_gen.cli._common, mrcr_gen.generate._units as units
mark("imports")
def after(owner, name, label, once=False):
    original, done = getattr(owner, name), []
    def wrapped(*args, **kwargs):
        result = original(*args, **kwargs)
        if not (once and done):
            mark(label(result) if callable(label) else label)
            done.append(1)
        return result
    setattr(owner, name, wrapped)
after(_assembler.V2Assembler, "fewshot", "first few-shot block (o200k built)", once=True)
after(_assembler.V2Assembler, "build", lambda t: f"transcript built ({len(t.turns)} turns)")
after(_rows.V2FileWriter, "close", "rows written, file closed")
after(units, "sealed_sidecar", "sidecar sealed (sha256)")
def report():
    mark("exit handlers")
    for (name, faults, cpu), (_, faults_before, cpu_before) in zip(marks[1:], marks):
        print(f"STAGE {name}|{cpu - cpu_before:.4f}|{faults - faults_before}", file=sys.stderr)
atexit.register(report)
from mrcr_gen.cli import gen_main
sys.argv[0] = "mrcr-gen"
gen_main()
"""


def run(code: Path, out: Path, args: argparse.Namespace, seed: int) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(code), str(ROOT)]), PYTHONSAFEPATH="1")
    env["MRCR_GEN_CACHE"] = str(out.parent / "cache")
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(env["MRCR_GEN_CACHE"], ignore_errors=True)
    options = ["--recipe", "mrcr-v2", "--needles", "8", "--tokens", str(args.tokens), "--samples", str(args.rows)]
    command = [sys.executable, "-c", PROBE, *options, "--seed", str(seed), "--out", str(out)]
    started = time.perf_counter()
    process = psutil.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    cpu: dict[int, float] = {}
    while process.poll() is None:  # the tree's CPU, each process's last reading before it ended
        try:
            tree = [process, *process.children(recursive=True)]
        except psutil.Error:
            tree = [process]
        for member in tree:
            try:
                times = member.cpu_times()
                cpu[member.pid] = times.user + times.system
            except psutil.Error:
                pass
        time.sleep(0.01)
    wall = time.perf_counter() - started
    stderr = process.stderr.read() if process.stderr else ""
    if process.returncode != 0:
        raise SystemExit(f"{command} failed ({process.returncode}):\n{stderr[-2000:]}")
    stages = [line.split("|") for line in re.findall(r"^STAGE (.*)$", stderr, re.M)]
    return {"wall": wall, "tree_cpu": sum(cpu.values()), "stages": [(n, float(c), int(f)) for n, c, f in stages]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--code", type=Path, help="another checkout's mrcr_gen (before), run in alternation")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rows", type=int, default=16)
    parser.add_argument("--tokens", type=int, default=1048576)
    args = parser.parse_args()
    sides = {"this checkout": ROOT, **({"--code": args.code.resolve()} if args.code else {})}
    found: dict[str, list[dict]] = {name: [] for name in sides}
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(1, args.rounds + 1):
            for name, code in sides.items():
                found[name].append(run(code, Path(tmp) / "out", args, seed))
    print(f"mrcr-gen --recipe mrcr-v2, {args.rows} rows at {args.tokens}, medians of {args.rounds} round(s)")
    for name, runs in found.items():
        wall, tree = (statistics.median(r[key] for r in runs) for key in ("wall", "tree_cpu"))
        print(f"\n{name}: wall {wall:.2f} s, CPU of the process tree {tree:.2f} s")
        for i, (stage, _, _) in enumerate(runs[0]["stages"]):
            cpu = statistics.median(r["stages"][i][1] for r in runs if len(r["stages"]) > i)
            faults = statistics.median(r["stages"][i][2] for r in runs if len(r["stages"]) > i)
            print(f"  {stage:40} CPU {cpu:6.3f} s   minor faults {faults:8.0f} ({faults * 4 / 1024:.0f} MB)")
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
