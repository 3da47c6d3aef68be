"""Whether needle positions give the answer away: a depth-heuristic solver on generated rows beside
its expectation under uniform placement (issue 33 item 1).

    python bench/bench_placement.py                  # 300 rows per needle count, both recipes
    python bench/bench_placement.py --rows 600 --recipe openai-mrcr

The solver answers the k-th of n needles with the needle nearest depth (k - 0.5)/n of the
conversation, depth being a needle's slot among the conversation's pairs (openai/mrcr) or turns
(MRCR v2), (slot + 0.5) / slots. It is right when it picks the target. Its expectation under
uniform placement is simulated on each row's own slot count and target ordinal (`--draws` uniform
placements per row): a generator that places needles uniformly scores within a few points of it;
one that put needle k in the k-th of n strata scored 100% / 97% / 85% against 87% / 64% / 45%.

openai/mrcr rows come from the assembler (offline writer, bins 8192, 16384 and 32768 in turn, one
seed per row); MRCR v2 rows from transcripts of the same buckets, one row per transcript (its key and
ordinal drawn), so that rows are independent. Needs no network.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mrcr_gen import Assembler, OfflineWriter, bin_by_upper  # noqa: E402
from mrcr_gen._budget import needle_slots  # noqa: E402
from mrcr_gen.recipes.mrcr_v2 import V2Assembler, V2OfflineWriter, load_v2_catalog  # noqa: E402
from mrcr_gen.recipes.openai_mrcr._generate import DEFAULT_DATE_ADDED  # noqa: E402

NEEDLES = (2, 4, 8)
UPPERS = (8192, 16384, 32768)
#: A row: (the needles' slots in order, the slot count, the target ordinal).
Row = tuple[list[int], int, int]


def depth_guess(slots: list[int], n_slots: int, k: int) -> int:
    """Ordinal (1-based) of the needle nearest depth (k - 0.5)/n."""
    depth = (k - 0.5) / len(slots)
    return 1 + min(range(len(slots)), key=lambda j: abs((slots[j] + 0.5) / n_slots - depth))


def openai_rows(n: int, rows: int, seed: int) -> Iterator[Row]:
    assembler = Assembler(OfflineWriter(seed), date_added=DEFAULT_DATE_ADDED)
    for i in range(rows):
        s = assembler.sample(n_needles=n, seed=seed * 1_000_003 + i, token_bin=bin_by_upper(UPPERS[i % len(UPPERS)]))
        yield [(index - 1) // 2 for index in s.needle_indices], (s.row.total_messages - 2) // 2, s.target_ordinal


def v2_rows(n: int, rows: int, seed: int) -> Iterator[Row]:
    assembler = V2Assembler(V2OfflineWriter(seed), load_v2_catalog())
    rng = random.Random(seed)
    for i in range(rows):
        upper = UPPERS[i % len(UPPERS)]
        transcript = assembler.build(n_needles=n, target=upper, lowest=upper // 2 + 1, seed=seed * 1_000_003 + i)
        key, k = rng.choice(transcript.pairs())
        yield transcript.turn_indices[key], len(transcript.turns), k


def measure(rows: list[Row], draws: int, seed: int) -> tuple[float, float]:
    """The solver's hit rate on `rows`, and its simulated rate under uniform placement."""
    rng = random.Random(seed)
    hits = sum(depth_guess(slots, n_slots, k) == k for slots, n_slots, k in rows)
    expected = sum(
        depth_guess(needle_slots(rng, n_slots, len(slots)), n_slots, k) == k
        for slots, n_slots, k in rows
        for _ in range(draws)
    )
    return hits / len(rows), expected / (len(rows) * draws)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=300, help="rows per needle count and recipe")
    parser.add_argument("--draws", type=int, default=200, help="uniform placements simulated per row")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--recipe", choices=("openai-mrcr", "mrcr-v2", "both"), default="both")
    args = parser.parse_args()
    sources = {"openai-mrcr": openai_rows, "mrcr-v2": v2_rows}
    recipes = list(sources) if args.recipe == "both" else [args.recipe]
    print("| recipe | needles | rows | depth solver right | expected (uniform) | difference |")
    print("|---|---:|---:|---:|---:|---:|")
    for recipe in recipes:
        for n in NEEDLES:
            rows = list(sources[recipe](n, args.rows, args.seed))
            hit, expected = measure(rows, args.draws, args.seed)
            print(
                f"| {recipe} | {n} | {len(rows)} | {hit:.1%} | {expected:.1%} | {100 * (hit - expected):+.1f} points |",
                flush=True,
            )


if __name__ == "__main__":
    main()
