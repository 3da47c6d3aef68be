"""What `mrcr-validate --shortcuts` costs on rows of the official size, and what it would cost on difflib:

    python bench/bench_shortcuts.py                       # 240 rows built from the real rows; extrapolated to 2,400
    python bench/bench_shortcuts.py --rows 2400 --workers 2
    python bench/bench_shortcuts.py --data ~/mrcr          # the official openai/mrcr files themselves

Without --data, builds --rows openai/mrcr rows from `../shared/mrcr-real/mrcr_real_rows.parquet`
(145K-token rows of 2, 4 and 8 needles: about the official set's mean row) by shuffling each real
row's ask/writing pairs with a seed (answer, index and counts rebuilt, so every row is valid), in
row groups of 16 rows. Then, each in this process, timed wall clock:

  - check:      `validate_paths(..., tokens=False)`, the checks alone;
  - shortcuts:  the same with `shortcuts=True` (the probes run in the same workers, after the checks);
  - per row:    the probes of one row in this process with the fast matcher (`mrcr_gen._matcher`),
                and with pure-Python difflib (what the official grader calls), over --difflib-rows rows.

The probes' cost is shortcuts - check; the 2,400-row figure scales it by 2,400 / rows. The token
recount (the default of mrcr-validate) is left out of both: it costs the same with or without the probes.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from difflib import SequenceMatcher
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from mrcr_gen import MRCR_SCHEMA  # noqa: E402
from mrcr_gen.recipes.openai_mrcr._floors import needle_indices  # noqa: E402
from mrcr_gen.recipes.openai_mrcr._models import QUERY_PATTERN  # noqa: E402
from mrcr_gen.recipes.openai_mrcr._probes import probe_row  # noqa: E402
from mrcr_gen.recipes.openai_mrcr._validate import SPEC  # noqa: E402
from mrcr_gen.validate import validate_paths  # noqa: E402
from mrcr_gen.validate._shortcuts import measure  # noqa: E402

REAL = ROOT.parent / "shared" / "mrcr-real" / "mrcr_real_rows.parquet"
OFFICIAL_ROWS = 2400


def shuffled(row: dict, seed: int) -> dict:
    """The row with its ask/writing pairs in a seeded order; answer, index and counts rebuilt."""
    messages = json.loads(row["prompt"])
    pairs = [messages[i : i + 2] for i in range(1, len(messages) - 1, 2)]
    random.Random(seed).shuffle(pairs)
    messages = [messages[0], *(m for pair in pairs for m in pair), messages[-1]]
    k = int(QUERY_PATTERN.match(messages[-1]["content"])["ordinal"])
    needles = needle_indices(messages)
    target = needles[k - 1]
    return {
        **row,
        "prompt": json.dumps(messages),
        "answer": row["random_string_to_prepend"] + messages[target + 1]["content"],
        "desired_msg_index": target,
    }


def build(rows: int, directory: Path) -> Path:
    real = pq.read_table(REAL).to_pylist()
    path = directory / "rows.parquet"
    with pq.ParquetWriter(path, MRCR_SCHEMA, compression="zstd") as writer:
        for first in range(0, rows, 16):
            batch = [shuffled(real[i % len(real)], i) for i in range(first, min(rows, first + 16))]
            writer.write_table(pa.Table.from_pylist(batch, schema=MRCR_SCHEMA))
    return path


def timed(label: str, call) -> float:
    start = time.perf_counter()
    call()
    seconds = time.perf_counter() - start
    print(f"{label:<34} {seconds:8.2f} s", flush=True)
    return seconds


def difflib_score(reply: str, target: str) -> float:
    return SequenceMatcher(None, reply, target).ratio()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=240)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--data", type=Path, default=None, help="official openai/mrcr files instead of built rows")
    parser.add_argument("--difflib-rows", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = args.data if args.data is not None else build(args.rows, Path(tmp))
        n = sum(pq.ParquetFile(p).metadata.num_rows for p in ([data] if data.is_file() else data.rglob("*.parquet")))
        print(f"{n} rows of {data}")
        options = {"spec": SPEC, "tokens": False, "workers": args.workers}
        check = timed("check", lambda: validate_paths([data], **options))
        both = timed("check + shortcuts", lambda: validate_paths([data], shortcuts=True, **options))
        records = pq.read_table(next(iter([data] if data.is_file() else sorted(data.rglob("*.parquet"))))).slice(
            0, args.difflib_rows
        )
        rows = [probe_row(r) for r in records.to_pylist()]
        fast = timed("probes per row, fast matcher", lambda: [measure(r, SPEC.probes.score) for r in rows if r])
        slow = timed("probes per row, difflib", lambda: [measure(r, difflib_score) for r in rows if r])
        probes = max(0.0, both - check)
        print(f"probes: {probes:.2f} s for {n} rows = {probes / n * 1000:.1f} ms a row")
        print(f"  ~{probes / n * OFFICIAL_ROWS:.0f} s for {OFFICIAL_ROWS} rows on these workers")
        each = 1000 / len(rows)
        print(f"  one row in this process: {fast * each:.0f} ms fast, {slow * each:.0f} ms difflib")


if __name__ == "__main__":
    main()
