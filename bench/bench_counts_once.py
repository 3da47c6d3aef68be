"""Issue 36, side by side in one run: mrcr-gen's commands against the leanest loops a user could write
(`minimal_loop.py`), each for a first run (an empty count cache) and a second run (the cache warm).

    python bench/bench_counts_once.py                                   # full size (many minutes)
    python bench/bench_counts_once.py --eval-rows 8 --v2-rows 4 --gen-rows 8 --rounds 1   # quicker
    python bench/bench_counts_once.py --jobs help --code /tmp/main-checkout   # command start, before

Jobs (run on an idle machine: every side shares its cores with the loopback server):
  - eval: `mrcr-eval -c 8 --max-context-window 1048576` on --eval-rows rows of (524288, 1048576] (4
    needles, made once by mrcr-gen under --dir) against the test server answering at once, and the
    minimal loop (pandas + tiktoken + urllib, one request at a time) on the same rows and server. Also
    the same files without their sidecars (a file made elsewhere: every row counted, on every core,
    then cached). Goal: mrcr-eval <= 0.5x the loop's time, its first request no later.
  - v2: `mrcr-gen --recipe mrcr-v2` --v2-rows rows at --tokens 1048576, then `mrcr-validate` on the
    file, as commands, against `minimal_loop.py v2` (read_csv + tiktoken) on that file. Goal <= 0.5 each.
    Also `mrcr-validate` on a copy without its sidecar (a file made elsewhere: counted, then cached).
  - gen: `mrcr-gen` --gen-rows rows of 8 needles in the 1M bin against one tiktoken pass over what it
    wrote (`_measure.naive_loop`: read_parquet, json.loads, encode every message and the answer).
    Goal <= 0.30. `--warmup`: a first round of both sides, not counted (this VM's memory is dear to
    the first process that touches it after a pause, and mrcr-gen runs first in a round).
  - help: `mrcr-gen --help`, `mrcr-validate --help`, `mrcr-eval --help`, --help-runs times each (median).

Each command runs in a fresh process with `MRCR_GEN_CACHE` set to a folder of this run (emptied before
a first run). `--code DIR` runs the commands from another checkout's `mrcr_gen` (before and after).
Timings on a loaded machine are upper bounds, and ratios within a round are the fairer figure.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _measure import measure, naive_command
from bench_eval_start import ROOT, WINDOW, Server, build, code_env, eval_command, timed

LOOP = str(Path(__file__).with_name("minimal_loop.py"))
ENTRY = "import sys; from mrcr_gen.cli import {0}; sys.argv[0] = {1!r}; {0}()"


def cli(entry: str, prog: str, *args: str) -> list[str]:
    return [sys.executable, "-c", ENTRY.format(entry, prog), *args]


def fresh_cache(env: dict) -> None:
    shutil.rmtree(env["MRCR_GEN_CACHE"], ignore_errors=True)


def fresh_out(work: Path, name: str, env: dict) -> Path:
    """An empty output folder `work / name`, and an empty count cache: a first run."""
    shutil.rmtree(work / name, ignore_errors=True)
    fresh_cache(env)
    return work / name


def median(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def show(name: str, runs: list[dict], baseline: float | None = None) -> dict:
    wall = median(runs, "wall")
    line = f"  {name:44} {wall:7.2f} s {[round(r['wall'], 2) for r in runs]}"
    if "first_request" in runs[0]:
        line += f"  first request {median(runs, 'first_request'):5.2f} s"
    found = {"wall": wall, "walls": [r["wall"] for r in runs]}
    if baseline:
        found["ratio"] = wall / baseline
        line += f"  ratio {found['ratio']:.3f}"
    print(line, flush=True)
    return found


def eval_job(args: argparse.Namespace, env: dict, work: Path) -> dict:
    paths = build(args.dir, "long", (1048576,), args.eval_rows)
    bare = work / "no-sidecar"  # the same rows as a file made elsewhere
    bare.mkdir(exist_ok=True)
    bare_paths = []
    for path in paths:
        bare_paths.append(bare / f"{path.parent.name}-{path.name}")
        shutil.copyfile(path, bare_paths[-1])
    runs: dict[str, list[dict]] = {}
    with Server(0.0) as server:
        for _ in range(args.rounds):
            loop = [sys.executable, LOOP, "eval", "--base-url", server.base_url, *map(str, paths)]
            runs.setdefault("minimal loop", []).append(timed(server, loop, env))
            for label, files in (("sidecar", paths), ("no sidecar", bare_paths)):
                fresh_cache(env)
                for run in ("first", "second"):
                    command = eval_command(server, files, work / "eval-out", 8, WINDOW)
                    runs.setdefault(f"mrcr-eval -c 8, {label}, {run} run", []).append(timed(server, command, env))
    print(f"\neval: {args.eval_rows} rows of (524288, 1048576], server answering at once, {args.rounds} round(s)")
    loop_wall = median(runs["minimal loop"], "wall")
    return {name: show(name, found, None if name == "minimal loop" else loop_wall) for name, found in runs.items()}


def v2_job(args: argparse.Namespace, env: dict, work: Path) -> dict:
    runs: dict[str, list[dict]] = {}
    for round_ in range(1, args.rounds + 1):
        out = fresh_out(work, "v2", env)
        options = ["--recipe", "mrcr-v2", "--needles", "8", "--tokens", "1048576", "--samples", str(args.v2_rows)]
        command = cli("gen_main", "mrcr-gen", *options, "--seed", str(round_), "--out", str(out))
        runs.setdefault("mrcr-gen --recipe mrcr-v2", []).append(measure(command, env=env, memory=False))
        [path] = sorted(out.rglob("*.csv"))
        runs.setdefault("read_csv + tiktoken", []).append(measure([sys.executable, LOOP, "v2", str(path)], env=env))
        for run in ("first", "second"):
            check = cli("validate_main", "mrcr-validate", str(path), "--json", str(work / "report.json"))
            runs.setdefault(f"mrcr-validate, {run} run", []).append(measure(check, env=env, memory=False))
        bare = work / "v2-no-sidecar" / path.name  # the same rows as a file made elsewhere
        bare.parent.mkdir(exist_ok=True)
        shutil.copyfile(path, bare)
        fresh_cache(env)
        for run in ("first", "second"):
            check = cli("validate_main", "mrcr-validate", str(bare), "--json", str(work / "report.json"))
            runs.setdefault(f"mrcr-validate, no sidecar, {run} run", []).append(measure(check, env=env, memory=False))
    print(f"\nv2: {args.v2_rows} rows at 1048576 tokens, 8 needles, {args.rounds} round(s)")
    loop_wall = median(runs["read_csv + tiktoken"], "wall")
    return {name: show(name, found, None if name.startswith("read_csv") else loop_wall) for name, found in runs.items()}


def gen_job(args: argparse.Namespace, env: dict, work: Path) -> dict:
    runs: dict[str, list[dict]] = {}
    # Round 0, when asked for, warms the machine and is not counted: on this VM the first process to
    # touch memory after a pause pays for it (up to ~8 ms a MB), and mrcr-gen runs before its baseline.
    for round_ in range(0 if args.warmup else 1, args.rounds + 1):
        out = fresh_out(work, "gen", env)
        options = ["--needles", "8", "--bin", "1048576", "--samples", str(args.gen_rows), "--seed", str(round_ or 1)]
        command = cli("gen_main", "mrcr-gen", *options, "--out", str(out))
        generated = measure(command, env=env)
        files = sorted(out.rglob("*.parquet"))
        baseline = measure(naive_command(files), env=env)
        if round_:
            runs.setdefault("mrcr-gen", []).append(generated)
            runs.setdefault("one tiktoken pass", []).append(baseline)
    warm = ", after a warm-up round of both, not counted" if args.warmup else ""
    print(f"\ngen: {args.gen_rows} rows x 8 needles in the 1M bin, {args.rounds} round(s){warm}")
    loop_wall = median(runs["one tiktoken pass"], "wall")
    found = {name: show(name, r, None if name == "one tiktoken pass" else loop_wall) for name, r in runs.items()}
    print(
        f"  peak tree RSS: mrcr-gen {median(runs['mrcr-gen'], 'tree_rss_mb'):.0f} MB, "
        f"one tiktoken pass {median(runs['one tiktoken pass'], 'tree_rss_mb'):.0f} MB"
    )
    return found


def help_job(args: argparse.Namespace, env: dict, work: Path) -> dict:
    """Wall and CPU seconds (user + system, the process's own: less swayed by a loaded machine)."""
    import resource
    import subprocess
    import time

    print(f"\nhelp: median of {args.help_runs} runs (each a fresh process)")
    found = {}
    for entry, prog in (("gen_main", "mrcr-gen"), ("validate_main", "mrcr-validate"), ("eval_main", "mrcr-eval")):
        runs = []
        for _ in range(args.help_runs):
            before, started = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
            subprocess.run(cli(entry, prog, "--help"), env=env, capture_output=True, check=True, cwd=ROOT)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
            runs.append({"wall": time.perf_counter() - started, "cpu": cpu})
        found[prog] = show(f"{prog} --help", runs) | {"cpu": median(runs, "cpu")}
        print(f"  {'':44} CPU {found[prog]['cpu']:.2f} s", flush=True)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--eval-rows", type=int, default=60)
    parser.add_argument("--v2-rows", type=int, default=16)
    parser.add_argument("--gen-rows", type=int, default=100)
    parser.add_argument("--help-runs", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--warmup", action="store_true", help="gen: a first round of both sides, not counted")
    jobs = ["help", "eval", "v2", "gen"]
    parser.add_argument("--jobs", nargs="+", default=jobs, choices=jobs)
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "mrcr-bench-counts-once")
    parser.add_argument("--code", type=Path, help="a checkout whose mrcr_gen the commands run (default: this one)")
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    env, code = code_env(args.code), (args.code or ROOT).resolve()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"code {code}; cores {cores}; load average {os.getloadavg()[0]:.1f} at the start", flush=True)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        env["MRCR_GEN_CACHE"] = str(Path(tmp) / "cache")
        for job in args.jobs:
            work = Path(tmp) / job
            work.mkdir()
            results[job] = {"help": help_job, "eval": eval_job, "v2": v2_job, "gen": gen_job}[job](args, env, work)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    print("RESULT " + json.dumps(results, default=str))


if __name__ == "__main__":
    main()
