"""Scaling of `mrcr-gen` over the cores of this machine, with both engines, in one run:

    python bench/bench_scale.py                          # 8 files of 400 rows (the default size), 1M bin (~2.5B tokens)
    python bench/bench_scale.py --rows-per-file 100      # a shorter job: fixed costs weigh more
    python bench/bench_scale.py --rows-per-file 4        # a small job (25M tokens): start-up dominates
    python bench/bench_scale.py --rows-per-file 1 --bin 131072 --repeat 1   # a quick check that it works

Runs the same job (8 files in the bin) end to end as `mrcr-gen` commands: the local engine on
1 worker (one process, one thread: the one-core reference), the local engine on all cores, and
Ray with the same cores twice: cold (`--engine ray` starts its own local instance, start-up
included) and on a running cluster (`ray start --head` before the clock starts, then
`--address`, as cluster users run their jobs). Each is run `--repeat` times, the runs of one
round back to back (so a slower spell of the machine hits every configuration alike), and the
median counts. Checks that the outputs are byte-identical and prints each speedup over 1 worker
and the scaling efficiency = speedup / cores (target: >= 80% for both engines).

Every run includes what no number of cores shortens: the command's start-up (imports, loading the
tokenizer), and, for Ray, connecting and each worker's first imports; a cold Ray run also
includes starting and stopping Ray itself (about 2.5-4 s and 1.2-1.4 s here). The smaller the job, the
lower the efficiency any engine can show: run the smaller jobs too, to see that side.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _measure import measure


def digests(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and p.name != "README.md"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--rows-per-file", type=int, default=400)
    parser.add_argument("--needles", type=int, default=8)
    parser.add_argument("--bin", type=int, default=1048576)
    parser.add_argument("--cores", type=int, default=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count())
    parser.add_argument("--no-ray", action="store_true", help="skip the Ray runs (Ray not installed)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds of every run; the median counts")
    args = parser.parse_args()

    exe = shutil.which("mrcr-gen") or str(Path(sys.executable).with_name("mrcr-gen"))
    # Usage stats off, and no auth token written to the home folder by a local instance.
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}
    env.pop("RAY_ADDRESS", None)  # a local instance with exactly --cores CPUs
    runs: dict[str, list[str]] = {
        "local, 1 worker": ["--workers", "1"],
        f"local, {args.cores} workers": ["--workers", str(args.cores)],
    }
    ray_cli = shutil.which("ray") or str(Path(sys.executable).with_name("ray"))
    if not args.no_ray and subprocess.run([ray_cli, "status"], env=env, capture_output=True).returncode == 0:
        # The cold run would join it instead of starting its own, and `ray stop` below would end it.
        raise SystemExit("a Ray cluster is already running on this machine: stop it (`ray stop`) or pass --no-ray")
    walls: dict[str, list[float]] = {}
    outputs: dict[str, dict[str, str]] = {}
    ray_start = [ray_cli, "start", "--head", f"--num-cpus={args.cores}", "--include-dashboard=false",
                 "--disable-usage-stats"]
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        ray_dir = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))  # Ray wants a short path
        if not args.no_ray:
            runs[f"ray cold, {args.cores} CPUs"] = ["--engine", "ray", "--workers", str(args.cores)]
            runs[f"ray running, {args.cores} CPUs"] = ["--engine", "ray", "--address", "auto"]
        try:
            for round_ in range(args.repeat):
                for name, options in runs.items():
                    if "running" in name:  # started before the clock, as a cluster is
                        subprocess.run([*ray_start, f"--temp-dir={ray_dir}"], check=True, env=env, capture_output=True)
                    out = Path(tmp) / "out"
                    command = [exe, "--needles", str(args.needles), "--bin", str(args.bin),
                               "--samples", str(args.files * args.rows_per_file),
                               "--rows-per-file", str(args.rows_per_file), "--seed", "3", "--out", str(out), *options]
                    walls.setdefault(name, []).append(measure(command, env=env, memory=False)["wall"])
                    outputs.setdefault(name, digests(out))
                    shutil.rmtree(out)
                    if "running" in name:  # so that the next round's cold run starts its own
                        subprocess.run([ray_cli, "stop", "--force"], env=env, capture_output=True)
                    print(f"  round {round_ + 1}, {name}: {walls[name][-1]:.1f} s", file=sys.stderr, flush=True)
        finally:
            if not args.no_ray:
                subprocess.run([ray_cli, "stop", "--force"], env=env, capture_output=True)
            shutil.rmtree(ray_dir, ignore_errors=True)
    identical = all(o == next(iter(outputs.values())) for o in outputs.values())
    print(f"job: {args.files} files x {args.rows_per_file} rows, {args.needles} needles, bin upper {args.bin}; "
          f"cores {args.cores}; median of {args.repeat} round(s); outputs byte-identical: {identical}")
    one = statistics.median(walls["local, 1 worker"])
    for name, times in walls.items():
        median = statistics.median(times)
        speedup = one / median
        line = f"{name:<22} {median:7.1f} s ({min(times):.1f}-{max(times):.1f})   speedup {speedup:5.2f}x"
        if name != "local, 1 worker":
            efficiency = speedup / args.cores
            line += f"   scaling efficiency {efficiency:6.1%}   target >= 80%: {'met' if efficiency >= 0.8 else 'MISSED'}"
        print(line)
    if not identical:
        raise SystemExit("outputs differ between engines or worker counts")


if __name__ == "__main__":
    main()
