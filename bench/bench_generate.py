"""Generator speed against the honest baseline, in one run:

    python bench/bench_generate.py                      # full scale: 100 rows x 8 needles, 1M bin
    python bench/bench_generate.py --rows 4 --bin 131072   # a quick check that it works

1. times the `mrcr-gen` command end to end in a subprocess (start-up, tokenizer load, composing,
   writing parquet, sidecars and card included), with its default workers (all cores) unless
   --workers is given;
2. times, end to end in a subprocess, the seed's single-threaded loop over the files it wrote:
   pandas.read_parquet, json.loads, and len(enc.encode(m["content"])) for every message plus the
   answer: one tokenizer pass over the generated text.

Prints generator seconds / baseline seconds (target: below 0.5 in the 1M bin).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _measure import measure, naive_command


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100, help="rows to generate (default: 100, one full bin)")
    parser.add_argument("--needles", type=int, default=8)
    parser.add_argument("--bin", type=int, default=1048576, help="upper edge of the bin (default: the 1M bin)")
    parser.add_argument("--workers", type=int, help="mrcr-gen --workers (default: its own default, all cores)")
    args = parser.parse_args()

    mrcr_gen = shutil.which("mrcr-gen") or str(Path(sys.executable).with_name("mrcr-gen"))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "data"
        command = [mrcr_gen, "--needles", str(args.needles), "--bin", str(args.bin), "--samples", str(args.rows),
                   "--seed", "1", "--out", str(out)]
        if args.workers:
            command += ["--workers", str(args.workers)]
        generator = measure(command)
        files = sorted(out.rglob("*.parquet"))
        baseline = measure(naive_command(files))

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"{args.rows} rows x {args.needles} needles, bin upper {args.bin}: {baseline['tokens']:,} tokens in "
          f"{len(files)} file(s); cores {cores}, load average {os.getloadavg()[0]:.1f}")
    print(f"mrcr-gen (end to end, workers {args.workers or 'default'}): {generator['wall']:.2f} s, "
          f"peak tree RSS {generator['tree_rss_mb']:.0f} MB")
    print(f"seed loop (pandas + json + enc.encode per message + answer, 1 thread): {baseline['wall']:.2f} s")
    ratio = generator["wall"] / baseline["wall"]
    print(f"ratio mrcr-gen / seed loop: {ratio:.3f}   target < 0.5: {'met' if ratio < 0.5 else 'MISSED'}")


if __name__ == "__main__":
    main()
