"""MRCR v2 at scale: generate one bucket (default the largest, (4194304, 8388608]: 8M-token
transcripts), check it independently, and time generator and validator against plain loops.

    python bench/bench_v2.py [--bucket 8388608 | --tokens 8388608] [--rows 2] [--rows-per-transcript 2] [--needles 8]

Prints, measured in this process:
- generator seconds / one tiktoken pass over every generated `queries` string;
- mrcr-validate seconds / the naive loop (`pandas.read_csv`, then `len(enc.encode(queries))`
  and `len(enc.encode(writing))` per row, which is all upstream's tooling can check);
- peak RSS, and that every row's `context_len` equals tiktoken's count of the whole `queries`
  string and lies in the bucket (the exactness claim, checked from outside).
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

import pandas as pd

from mrcr_gen import o200k
from mrcr_gen.recipes.mrcr_v2 import V2Config, V2OfflineWriter, generate_v2, v2_bucket, validate_v2_paths
from mrcr_gen.recipes.mrcr_v2._generate import tokens_range


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bucket", type=int, default=8388608, help="upper edge of the bucket (default 8388608)")
    parser.add_argument("--tokens", type=int, default=None, help="an exact target instead of a bucket (e.g. 8388608)")
    parser.add_argument("--rows", type=int, default=2)
    parser.add_argument("--rows-per-transcript", type=int, default=2)
    parser.add_argument("--needles", type=int, default=8)
    args = parser.parse_args()

    encoding = o200k()
    bucket = v2_bucket(args.bucket) if args.tokens is None else tokens_range(args.tokens)
    with tempfile.TemporaryDirectory() as tmp:
        config = V2Config(needles=(args.needles,), buckets=(bucket,), tokens=args.tokens, samples=args.rows,
                          rows_per_transcript=args.rows_per_transcript, seed=1, out=Path(tmp))
        start = time.perf_counter()
        summary = generate_v2(config, V2OfflineWriter(config.seed))
        generate_s = time.perf_counter() - start
        path = Path(tmp) / summary[0]["file"]

        start = time.perf_counter()
        frame = pd.read_csv(path)
        counts = [len(encoding.encode(q, disallowed_special=())) for q in frame["queries"]]
        answers = [len(encoding.encode(a[12:], disallowed_special=())) for a in frame["answer"]]
        naive_s = time.perf_counter() - start
        tiktoken_pass_s = naive_s  # the same pass over every generated queries string (and answers)

        start = time.perf_counter()
        report = validate_v2_paths([path], threads=2).report
        validate_s = time.perf_counter() - start

        exact = list(frame["context_len"]) == counts and list(frame["answer_token_count"]) == answers
        inside = all(n in bucket for n in counts)
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"bucket {bucket}: {len(frame)} rows from {summary[0]['transcripts']} transcripts, "
              f"context_len {min(counts)}..{max(counts)}, file {path.stat().st_size / 1e6:.1f} MB")
        print(f"exact (context_len == tiktoken count of the whole queries string): {exact}; inside the bucket: {inside}")
        print(f"validator findings: {len(report.findings)}")
        print(f"generate {generate_s:.1f} s / tiktoken pass {tiktoken_pass_s:.1f} s = {generate_s / tiktoken_pass_s:.2f}")
        print(f"mrcr-validate {validate_s:.1f} s / naive pandas+tiktoken loop {naive_s:.1f} s = {validate_s / naive_s:.2f}")
        print(f"peak RSS {peak_mb:.0f} MB")
        if not (exact and inside and not report.findings):
            raise SystemExit(1)


if __name__ == "__main__":
    main()
