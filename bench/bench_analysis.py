"""The per-row failure analysis on long rows, against the official grade of the same replies:

    python bench/bench_analysis.py                   # 3 rows per (bin, needle count), bins 8k..1M
    python bench/bench_analysis.py --rows 1 --max-bin 131072   # a quick check that it works

Generates rows with mrcr-gen (offline writer) for 2, 4 and 8 needles in every bin up to --max-bin,
makes seven replies per row (the target, another needle, a distractor, text from nowhere, and
the messy ones: the target in upper case, the target repeated 20 times, the prefix written after
the target), and times, per bin, reading the row into a transcript plus the analysis of each reply, beside the
official `grade` of the same replies (the work the official loop does per row anyway). Prints the
mean seconds per row per bin and the projected total for the official layout of 2,400 rows (100
rows per bin x 8 bins x 3 needle counts, one reply each), single-threaded: a projection from the
measured per-row means, not a run over 2,400 rows. Last, the bootstrap 95% intervals of a
2,400-row summary (`_ci.bootstrap`, 1,000 replicates), timed once.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

BIN_UPPERS = (8192, 16384, 32768, 65536, 131072, 262144, 524288, 1048576)


def replies(sample, transcript) -> list[str]:
    rs = sample.row.random_string_to_prepend
    needles = [transcript.writings[k].text for k in transcript.needles]
    other = needles[0] if sample.target_ordinal != 1 else needles[-1]
    distractor = next(w.text for k, w in enumerate(transcript.writings) if k not in transcript.needles)
    target = sample.row.answer[len(rs) :]
    return [
        sample.row.answer, rs + other, rs + distractor, rs + "Nothing of the kind was ever written here. " * 12,
        rs + target.upper(), rs + "\n".join([target] * 20), target + "\n" + rs,
    ]  # fmt: skip


def time_bootstrap() -> float:
    """Seconds for the intervals of 2,400 rows (8 bins x 3 needle counts x 100 rows)."""
    import random

    from mrcr_gen.eval._ci import bootstrap

    rng = random.Random(0)
    rows = [(f"bin{u}", u, n, rng.random(), True) for u in BIN_UPPERS for n in (2, 4, 8) for _ in range(100)]
    started = time.perf_counter()
    bootstrap(rows, None)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=3, help="rows per (bin, needle count)")
    parser.add_argument("--max-bin", type=int, default=1048576)
    args = parser.parse_args()

    from mrcr_gen import generate_sample
    from mrcr_gen.eval._analysis import analyse_reply
    from mrcr_gen.recipes.openai_mrcr._analysis import transcript_of
    from mrcr_gen.recipes.openai_mrcr._grade import grade

    print(f"{'bin':>8} {'rows':>5} {'analysis s/row':>15} {'grade s/row':>12} {'max analysis s':>15}")
    projected_analysis = projected_grade = 0.0
    for upper in (b for b in BIN_UPPERS if b <= args.max_bin):
        analysis_times, grade_times = [], []
        for n_needles in (2, 4, 8):
            for seed in range(args.rows):
                sample = generate_sample(n_needles=n_needles, bin_upper=upper, seed=seed)
                messages = json.loads(sample.row.prompt)
                rs = sample.row.random_string_to_prepend
                for reply in replies(sample, transcript_of(messages, rs)):
                    started = time.perf_counter()
                    analyse_reply(reply, transcript_of(messages, rs))
                    analysis_times.append(time.perf_counter() - started)
                    started = time.perf_counter()
                    grade(reply, sample.row.answer, rs)
                    grade_times.append(time.perf_counter() - started)
        mean_analysis, mean_grade = statistics.mean(analysis_times), statistics.mean(grade_times)
        projected_analysis += 300 * mean_analysis
        projected_grade += 300 * mean_grade
        print(f"{upper:>8} {len(analysis_times):>5} {mean_analysis:>15.4f} {mean_grade:>12.4f} {max(analysis_times):>15.4f}")
    print(
        f"projected for 2,400 rows (100 per bin x 8 bins x 3 needle counts), one thread: "
        f"analysis {projected_analysis:.1f} s, official grade {projected_grade:.1f} s"
    )
    print(f"bootstrap 95% intervals of a 2,400-row summary (1,000 replicates): {time_bootstrap():.2f} s")


if __name__ == "__main__":
    main()
