"""MRCR v2 at scale: `mrcr-gen --recipe mrcr-v2` and `mrcr-validate` against the seed-style loop,
timed end to end (each a fresh process, imports and tokenizer load included) in one run, and the
exactness of every count checked from outside.

    python bench/bench_v2.py --tokens 1048576 --rows 32                          # 1M, 8 rows a transcript
    python bench/bench_v2.py --tokens 1048576 --rows 8 --rows-per-transcript 2   # the unflattering case
    python bench/bench_v2.py --tokens 8388608 --rows 2 --rounds 1                # 8M rows stay exact

Each round, in this order: the generator (into a fresh folder), the seed-style loop over the file it
wrote (`minimal_loop.v2_loop`: `pandas.read_csv`, then `len(enc.encode(...))` of every `queries` and every
answer's writing, on one thread: all that upstream's tooling can check), and `mrcr-validate FILE` (default workers).
Prints each round's seconds and the medians of the ratios generate / loop and validate / loop; then,
on the last round's file, whether every row's `context_len` equals tiktoken's count of the whole
`queries` string (and `answer_token_count` that of the writing), whether it lies in the range, and
the validator's findings. The ratios are taken within a round, so a machine that other work slows
slows both sides; they are still upper bounds on a loaded machine.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _measure import measure
from minimal_loop import v2_loop as seed_loop  # read_csv + tiktoken, one thread

ENTRY = "import sys; from mrcr_gen.cli import {}; sys.argv[0] = {!r}; {}()"


def _cli(entry: str, prog: str, *args: str) -> list[str]:
    return [sys.executable, "-c", ENTRY.format(entry, prog, entry), *args]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--bucket", type=int, default=None, help="upper edge of a bucket, e.g. 1048576")
    where.add_argument("--tokens", type=int, default=None, help="an exact target (default 1048576)")
    parser.add_argument("--rows", type=int, default=32)
    parser.add_argument("--rows-per-transcript", type=int, default=8, help="default 8, as mrcr-gen's")
    parser.add_argument("--needles", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.bucket is None and args.tokens is None:
        args.tokens = 1048576
    target = ["--bin", str(args.bucket)] if args.bucket is not None else ["--tokens", str(args.tokens)]

    from mrcr_gen.recipes.mrcr_v2 import v2_bucket
    from mrcr_gen.recipes.mrcr_v2._generate import tokens_range

    wanted = v2_bucket(args.bucket) if args.bucket is not None else tokens_range(args.tokens)
    loop = [sys.executable, __file__, "--seed-loop"]
    gen_ratios, validate_ratios = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(1, args.rounds + 1):
            out = Path(tmp) / "v2"
            shutil.rmtree(out, ignore_errors=True)
            generate = measure(
                _cli(
                    "gen_main",
                    "mrcr-gen",
                    "--recipe",
                    "mrcr-v2",
                    "--needles",
                    str(args.needles),
                    *target,
                    "--samples",
                    str(args.rows),
                    "--rows-per-transcript",
                    str(args.rows_per_transcript),
                    "--seed",
                    str(round_),
                    "--out",
                    str(out),
                ),
                memory=False,
            )
            [path] = sorted(out.rglob("*.csv"))
            naive = measure([*loop, str(path)], memory=False)
            validate = measure(
                _cli("validate_main", "mrcr-validate", str(path), "--json", str(Path(tmp) / "report.json")),
                memory=False,
            )
            gen_ratios.append(generate["wall"] / naive["wall"])
            validate_ratios.append(validate["wall"] / naive["wall"])
            print(
                f"round {round_}: generate {generate['wall']:.1f} s, seed loop {naive['wall']:.1f} s, "
                f"mrcr-validate {validate['wall']:.1f} s (exit {validate['exit_code']}): "
                f"{gen_ratios[-1]:.2f} / {validate_ratios[-1]:.2f}",
                flush=True,
            )

        import pandas as pd

        frame = pd.read_csv(path)
        exact = (
            list(frame["context_len"]) == naive["context_len"]
            and list(frame["answer_token_count"]) == naive["answer_token_count"]
        )
        inside = all(n in wanted for n in naive["context_len"])
        report = json.loads((Path(tmp) / "report.json").read_text())
        findings = report.get("findings", [])
        print(
            f"{wanted}: {len(frame)} rows, context_len {min(naive['context_len'])}..{max(naive['context_len'])}, "
            f"{args.rows_per_transcript} rows a transcript, file {path.stat().st_size / 1e6:.1f} MB"
        )
        print(
            f"exact (context_len == tiktoken count of the whole queries string): {exact}; inside: {inside}; "
            f"validator findings: {len(findings)}"
        )
        print(
            f"generate / seed loop: median {statistics.median(gen_ratios):.2f} "
            f"(rounds {', '.join(f'{r:.2f}' for r in gen_ratios)})"
        )
        print(
            f"mrcr-validate / seed loop: median {statistics.median(validate_ratios):.2f} "
            f"(rounds {', '.join(f'{r:.2f}' for r in validate_ratios)})"
        )
        if not (exact and inside and not findings and validate["exit_code"] == 0):
            raise SystemExit(1)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--seed-loop"]:
        print("RESULT " + json.dumps(seed_loop(sys.argv[2])), flush=True)
    else:
        main()
