"""The MRCR v2 random-writing floor of the offline writer over several transcripts, per needle count:

    python bench/bench_v2_floor.py                          # seeds 1-3, one 2-row transcript each
    python bench/bench_v2_floor.py --seeds 1-12 --bin 262144

bench/bench_fidelity.py measures one transcript per needle count with its defaults, and also builds
and scores openai/mrcr rows, which takes minutes. The floor of one transcript swings a lot with the
formats of the writings its rows ask for (a riddle or a tweet answer against the many short riddles
and tweets of the transcript scores two to three times a story's), so one transcript cannot tell a
change of the writer from luck: this generates one transcript per seed and needle count, in process
(the library call `mrcr-gen --recipe mrcr-v2` makes), and prints the floor of each transcript (the
mean over its rows, as bench_fidelity computes it: every writing, not mrcr-eval's sample of 16), their
mean and range, and the lowest trigram share and zlib ratio of any row (issue 23's other targets).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_fidelity import v2_row_stats  # noqa: E402

from mrcr_gen.recipes.mrcr_v2 import V2Config, V2OfflineWriter, generate_v2, v2_bucket  # noqa: E402


def seeds_of(text: str) -> list[int]:
    """'1-3' or '1,5,9'."""
    if "-" in text:
        low, high = text.split("-")
        return list(range(int(low), int(high) + 1))
    return [int(s) for s in text.split(",")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="1-3", help="one transcript per seed and needle count (default 1-3)")
    parser.add_argument("--rows", type=int, default=2, help="rows of each transcript (default 2)")
    parser.add_argument("--bin", type=int, default=262144, help="upper edge of the bucket (default 262144)")
    parser.add_argument("--needles", default="2,4,8")
    args = parser.parse_args()
    needles = tuple(int(n) for n in args.needles.split(","))

    started = time.perf_counter()
    floors: dict[int, list[float]] = {n: [] for n in needles}
    trigrams: list[float] = []
    zlibs: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in seeds_of(args.seeds):
            out = Path(tmp) / str(seed)
            config = V2Config(needles=needles, buckets=(v2_bucket(args.bin),), samples=args.rows,
                              rows_per_transcript=args.rows, seed=seed, out=out)
            generate_v2(config, V2OfflineWriter(seed))
            for path in sorted(out.rglob("*.csv")):
                rows = [v2_row_stats(row, 1_000_000) | {"n": int(row["num_relevant"])}
                        for row in pd.read_csv(path).to_dict("records")]
                floors[rows[0]["n"]].append(statistics.mean(r["random-writing floor"] for r in rows))
                trigrams += [r["trigram share"] for r in rows]
                zlibs += [r["zlib ratio"] for r in rows]
            print(f"seed {seed}: " + ", ".join(f"{n} needles {floors[n][-1]:.4f}" for n in needles), flush=True)
    print(f"bucket ({args.bin // 2}, {args.bin}], {len(floors[needles[0]])} transcript(s) of {args.rows} rows "
          f"per needle count, {time.perf_counter() - started:.0f} s")
    for n in needles:
        values = floors[n]
        print(f"{n} needles: random-writing floor mean {statistics.mean(values):.4f} "
              f"(transcripts {min(values):.4f}-{max(values):.4f})")
    print(f"lowest trigram share {min(trigrams):.3f}, lowest zlib ratio {min(zlibs):.3f} "
          "(targets: floor <= 0.02, trigram share >= 0.75, zlib ratio >= 0.33)")


if __name__ == "__main__":
    main()
