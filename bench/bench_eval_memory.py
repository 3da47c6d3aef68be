"""Benchmark: peak memory of mrcr-eval's row reader on a file whose single row group holds many
long rows, against the seed's `pandas.read_parquet` of the same file and the previous reader.

    python bench/bench_eval_memory.py [--rows 100] [--mb-per-row 4] [--dir DIR]

Builds (or reuses, under DIR, default $TMPDIR/mrcr-bench-eval) parquet files of --rows rows in
ONE row group, each with a prompt of about --mb-per-row MB (4 MB is about the 1M-token bin), in
two page layouts (a reader can never hold less than one parquet page):
  - paged: `write_batch_size=1`, one data page per row (the dictionary falls back after one value);
  - pyarrow-default: `pq.write_table` defaults, where a whole column chunk ends up in one page;
then runs each contender in its own subprocess and reports its peak RSS (getrusage ru_maxrss):
  - naive: `pandas.read_parquet(path)` and one `json.loads` per prompt, as the seed's loop does;
  - previous: `mrcr_gen.iter_rows` (every column, batches of 64), what mrcr-eval used before;
  - reader: `mrcr_gen.recipes.openai_mrcr._eval.read_mrcr_items` streaming and parsing every row (o200k counting
    stubbed out: the tokenizer's memory does not depend on the file; the runner holds at most
    --concurrency such rows more).
The point is that the reader's peak does not grow with the row-group size.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import string
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve()


def run_naive(path: str) -> dict:
    import pandas as pd

    frame = pd.read_parquet(path)
    chars = sum(len(m["content"]) for prompt in frame["prompt"] for m in json.loads(prompt))
    return {"chars": chars}


def run_reader(path: str) -> dict:
    from mrcr_gen.recipes.openai_mrcr import _eval as _mrcr

    # The tokenizer's own memory is the same whatever the file; leave it out to see the reader's.
    _mrcr.count_tokens_batch = lambda texts: [len(text) // 4 for text in texts]
    chars = 0
    for item in _mrcr.read_mrcr_items(path):
        chars += sum(len(m["content"]) for m in item.messages)
    return {"chars": chars}


def run_previous(path: str) -> dict:
    from mrcr_gen import iter_rows

    return {"chars": sum(len(m["content"]) for row in iter_rows(path) for m in json.loads(row.prompt))}


def build(path: Path, rows: int, mb_per_row: float, layout: str) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from mrcr_gen import MRCR_SCHEMA

    rng = random.Random(0)
    words = ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 9))) for _ in range(5000)]
    records = []
    for i in range(rows):
        target = int(mb_per_row * 1_000_000)
        messages, size = [{"role": "user", "content": "preamble"}], 0
        while size < target:
            text = " ".join(rng.choices(words, k=400))
            messages += [{"role": "user", "content": "write a poem about tapirs"}, {"role": "assistant", "content": text}]
            size += len(text)
        rs = "".join(rng.choices(string.ascii_letters, k=10))
        messages.append({"role": "user", "content": f"Prepend {rs} to the 1st (1 indexed) poem about tapirs. "
                                                    "Do not include any other text in your response."})
        records.append({"prompt": json.dumps(messages), "answer": rs + messages[2]["content"], "random_string_to_prepend": rs,
                        "n_needles": 1, "desired_msg_index": 1, "total_messages": len(messages), "n_chars": size,
                        "date_added": "01-01-2026"})
    table = pa.Table.from_pylist(records, schema=MRCR_SCHEMA)
    options = {"write_batch_size": 1} if layout == "paged" else {}
    pq.write_table(table, path, row_group_size=rows, compression="zstd", **options)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100)
    parser.add_argument("--mb-per-row", type=float, default=4.0)
    parser.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "mrcr-bench-eval"))
    parser.add_argument("--run", nargs=2, metavar=("KIND", "FILE"), help=argparse.SUPPRESS)
    parser.add_argument("--build", nargs=2, metavar=("LAYOUT", "FILE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build:
        build(Path(args.build[1]), args.rows, args.mb_per_row, args.build[0])
        return
    if args.run:
        kind, path = args.run
        result = {"naive": run_naive, "previous": run_previous, "reader": run_reader}[kind](path)
        result["max_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(json.dumps(result))
        return
    import pyarrow.parquet as pq

    print(f"this process (what every child starts from): peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f} MB")
    for layout in ("paged", "pyarrow-default"):
        path = Path(args.dir) / f"one-group-{args.rows}x{args.mb_per_row:g}MB-{layout}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():  # in a subprocess: Linux carries a peak RSS over fork and exec
            subprocess.run([sys.executable, str(HERE), "--build", layout, str(path), "--rows", str(args.rows),
                            "--mb-per-row", str(args.mb_per_row)], check=True)
        print(f"{layout}: {path.stat().st_size / 1e6:.1f} MB on disk, {pq.ParquetFile(path).num_row_groups} row group(s), "
              f"{args.rows} rows of ~{args.mb_per_row:g} MB")
        results = {}
        for kind in ("naive", "previous", "reader"):
            out = subprocess.run([sys.executable, str(HERE), "--run", kind, str(path)], capture_output=True, text=True, check=True)
            results[kind] = json.loads(out.stdout)
            print(f"  {kind:>8}: peak RSS {results[kind]['max_rss_mb']:8.1f} MB")
        assert len({r["chars"] for r in results.values()}) == 1, "the contenders read different text"
        print(f"  reader / naive peak RSS: {results['reader']['max_rss_mb'] / results['naive']['max_rss_mb']:.3f}")


if __name__ == "__main__":
    main()
