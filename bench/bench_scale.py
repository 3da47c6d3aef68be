"""Scaling of `mrcr-gen` over the cores of this machine, with both engines, in one run:

    python bench/bench_scale.py                          # full scale: 8 files x 4 rows, 1M bin
    python bench/bench_scale.py --rows-per-file 1 --bin 131072   # a quick check that it works

Runs the same job (8 files in the bin) end to end as `mrcr-gen` commands: the local engine on
1 worker, the local engine on all cores, and Ray (`--engine ray`, a local Ray instance started
with the same cores; its start-up is included). Checks that the three outputs are byte-identical
and prints each speedup over 1 worker and the scaling efficiency = speedup / cores
(target: >= 80% for both engines).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
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
    parser.add_argument("--rows-per-file", type=int, default=4)
    parser.add_argument("--needles", type=int, default=8)
    parser.add_argument("--bin", type=int, default=1048576)
    parser.add_argument("--cores", type=int, default=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count())
    parser.add_argument("--no-ray", action="store_true", help="skip the Ray run (Ray not installed)")
    args = parser.parse_args()

    exe = shutil.which("mrcr-gen") or str(Path(sys.executable).with_name("mrcr-gen"))
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    env.pop("RAY_ADDRESS", None)  # a local instance with exactly --cores CPUs
    runs = {"local, 1 worker": ["--workers", "1"], f"local, {args.cores} workers": ["--workers", str(args.cores)]}
    if not args.no_ray:
        runs[f"ray, {args.cores} CPUs"] = ["--engine", "ray", "--workers", str(args.cores)]
    results, outputs = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, options) in enumerate(runs.items()):
            out = Path(tmp) / str(i)
            command = [exe, "--needles", str(args.needles), "--bin", str(args.bin),
                       "--samples", str(args.files * args.rows_per_file), "--rows-per-file", str(args.rows_per_file),
                       "--seed", "3", "--out", str(out), *options]
            results[name] = measure(command, env=env)
            outputs[name] = digests(out)
            print(f"  {name}: {results[name]['wall']:.1f} s", file=sys.stderr, flush=True)
    identical = all(o == next(iter(outputs.values())) for o in outputs.values())
    print(f"job: {args.files} files x {args.rows_per_file} rows, {args.needles} needles, bin upper {args.bin}; "
          f"cores {args.cores}, load average {os.getloadavg()[0]:.1f}; outputs byte-identical: {identical}")
    one = results["local, 1 worker"]["wall"]
    for name, r in results.items():
        speedup = one / r["wall"]
        line = f"{name:<22} {r['wall']:7.1f} s   speedup {speedup:5.2f}x"
        if name != "local, 1 worker":
            efficiency = speedup / args.cores
            line += f"   scaling efficiency {efficiency:6.1%}   target >= 80%: {'met' if efficiency >= 0.8 else 'MISSED'}"
        print(line)
    if not identical:
        raise SystemExit("outputs differ between engines or worker counts")


if __name__ == "__main__":
    main()
