"""Generator speed against tokenization: generate rows in the (524288, 1048576] bin, then time one
tiktoken pass over every generated text (message contents and answers), in the same process.

    python bench/bench_generate.py [--rows 100] [--needles 8]

Prints generator_seconds / tiktoken_pass_seconds (target: below 0.5).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from mrcr_gen import (
    GenerateConfig,
    OfflineWriter,
    bin_by_upper,
    generate_dataset,
    iter_rows,
    o200k,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100, help="rows to generate (default: 100, one full bin)")
    parser.add_argument("--needles", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2, help="tiktoken threads for the baseline pass")
    args = parser.parse_args()

    encoding = o200k()  # loaded before timing: both sides use the same loaded encoding
    with tempfile.TemporaryDirectory() as tmp:
        config = GenerateConfig(
            needles=(args.needles,), bins=(bin_by_upper(1048576),), samples=args.rows, seed=1, out=Path(tmp)
        )
        start = time.perf_counter()
        result = generate_dataset(config, OfflineWriter(config.seed))
        generate_seconds = time.perf_counter() - start

        texts = []
        for path in result.files:
            for row in iter_rows(path):
                texts += [m["content"] for m in json.loads(row.prompt)] + [row.answer]
        n_chars = sum(map(len, texts))
        start = time.perf_counter()
        n_tokens = sum(len(t) for t in encoding.encode_ordinary_batch(texts, num_threads=args.threads))
        tokenize_seconds = time.perf_counter() - start

    print(f"rows: {args.rows} x {args.needles} needles, {n_tokens:,} tokens, {n_chars / 1e6:.0f} M chars")
    print(f"generator: {generate_seconds:.2f} s; one tiktoken pass ({args.threads} threads): {tokenize_seconds:.2f} s")
    print(f"ratio generator / tiktoken pass: {generate_seconds / tokenize_seconds:.3f} (target < 0.5)")


if __name__ == "__main__":
    main()
