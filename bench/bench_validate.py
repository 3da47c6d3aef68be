"""Benchmark: `mrcr-validate` (streaming, full o200k recount over the cores) against the naive
loop (pandas.read_parquet of the whole file, json.loads each prompt, tiktoken per message).

    python bench/bench_validate.py [--size-mb 200] [--workers N] [--dir DIR]

Builds (or reuses, under DIR, default $TMPDIR/mrcr-bench) a parquet file of generated rows of at
least --size-mb MB on disk, then runs each contender in its own subprocess and measures, in the
same run, wall time and peak memory:
  - tree RSS: peak of the summed RSS of the subprocess and all its descendants (pool workers,
    fork server), sampled every 20 ms with psutil; shared pages count once per process, so this
    is the most pessimistic figure for a process pool;
  - tree PSS: the same sum with shared pages split between the processes sharing them (Linux);
  - max RSS: the largest single process's peak (getrusage ru_maxrss, self and children).
Targets: validator >= 1.6x faster, peak memory <= 1/3 of the naive loop.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

HERE = Path(__file__).resolve()


# --- the contenders (run in a subprocess: `bench_validate.py --run KIND FILE`) ------------------


def run_naive(path: str, workers: int) -> dict:
    import pandas as pd

    from mrcr_gen import o200k

    enc = o200k()  # tiktoken.get_encoding("o200k_base"), with an offline fallback
    df = pd.read_parquet(path)
    total = 0
    for prompt in df["prompt"]:
        messages = json.loads(prompt)
        total += sum(len(enc.encode(m["content"])) for m in messages)
    return {"rows": len(df), "tokens": total}


def run_validator(path: str, workers: int) -> dict:
    from mrcr_gen import validate_file

    report = validate_file(path, workers=workers, tokens=True)
    return {"rows": report.summary.rows, "exit_code": report.exit_code, "by_bin": report.summary.by_bin,
            "findings": len(report.findings)}


def _child(kind: str, path: str, workers: int) -> None:
    import resource

    start = time.perf_counter()
    result = (run_naive if kind == "naive" else run_validator)(path, workers)
    result["seconds"] = time.perf_counter() - start
    result["maxrss_self_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result["maxrss_children_mb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print("RESULT " + json.dumps(result), flush=True)


# --- measuring ----------------------------------------------------------------------------------


def _tree(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return [proc]


def _sample(proc: psutil.Process, peaks: dict, stop: threading.Event) -> None:
    while not stop.is_set():
        rss = pss = 0
        for p in _tree(proc):
            try:
                rss += p.memory_info().rss
                if sys.platform.startswith("linux"):
                    pss += p.memory_full_info().pss
            except psutil.Error:
                pass
        peaks["rss"] = max(peaks["rss"], rss)
        peaks["pss"] = max(peaks["pss"], pss)
        stop.wait(0.02)


def measure(kind: str, path: Path, workers: int) -> dict:
    command = [sys.executable, str(HERE), "--run", kind, str(path), "--workers", str(workers)]
    start = time.perf_counter()
    proc = psutil.Popen(command, stdout=subprocess.PIPE, text=True)
    peaks = {"rss": 0, "pss": 0}
    stop = threading.Event()
    sampler = threading.Thread(target=_sample, args=(proc, peaks, stop), daemon=True)
    sampler.start()
    out, _ = proc.communicate()
    wall = time.perf_counter() - start
    stop.set()
    sampler.join()
    if proc.returncode != 0:
        raise SystemExit(f"{kind} run failed with exit code {proc.returncode}")
    result = json.loads(next(line for line in out.splitlines() if line.startswith("RESULT "))[7:])
    result.update(wall=wall, tree_rss_mb=peaks["rss"] / 2**20, tree_pss_mb=peaks["pss"] / 2**20)
    result["max_rss_mb"] = max(result["maxrss_self_mb"], result["maxrss_children_mb"])
    return result


# --- the data -----------------------------------------------------------------------------------


def build_file(directory: Path, size_mb: int) -> Path:
    """Generated rows (bins 262144..1048576, 2/4/8 needles), repeated until the file holds at
    least `size_mb` MB on disk. Reused when it already exists."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from mrcr_gen import MRCR_SCHEMA, generate_sample

    path = directory / f"mrcr-bench-{size_mb}mb.parquet"
    if path.exists() and path.stat().st_size >= size_mb * 2**20:
        return path
    directory.mkdir(parents=True, exist_ok=True)
    print(f"building {path} ...", file=sys.stderr, flush=True)
    rows = []
    for seed, (needles, upper) in enumerate(
        [(n, b) for b in (262144, 524288, 1048576) for n in (2, 4, 8)]
    ):
        rows.append(generate_sample(n_needles=needles, bin_upper=upper, seed=seed).row.model_dump())
    one = pa.Table.from_pylist(rows, schema=MRCR_SCHEMA)
    probe = directory / ".probe.parquet"
    pq.write_table(one, probe, compression="zstd")
    per_copy = probe.stat().st_size
    probe.unlink()
    copies = -(-size_mb * 2**20 // per_copy) + 1
    table = pa.concat_tables([one] * copies)
    from mrcr_gen._parquet import write_table_atomic

    write_table_atomic(table, path)  # exactly as the generator writes its files
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=200)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--repeat", type=int, default=1, help="runs of each contender, alternated")
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "mrcr-bench")
    parser.add_argument("--run", choices=["naive", "validator"], help=argparse.SUPPRESS)
    parser.add_argument("file", nargs="?", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run:
        _child(args.run, args.file, args.workers)
        return

    path = build_file(args.dir, args.size_mb)
    import pyarrow.parquet as pq

    meta = pq.ParquetFile(path).metadata
    text_mb = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups)) / 2**20
    print(
        f"file {path}: {path.stat().st_size / 2**20:.0f} MB on disk, {text_mb:.0f} MB decoded, "
        f"{meta.num_rows} rows, {meta.num_row_groups} row group(s); cores {os.cpu_count()}, workers {args.workers}, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    runs: dict[str, list[dict]] = {"validator": [], "naive": []}
    for i in range(args.repeat):  # alternate (ABBA...) so load drifts hit both alike
        order = ("validator", "naive") if i % 2 == 0 else ("naive", "validator")
        for kind in order:
            runs[kind].append(measure(kind, path, args.workers))
            print(f"  run {i + 1} {kind}: {runs[kind][-1]['wall']:.1f} s", file=sys.stderr, flush=True)
    # Fastest wall time of each (least disturbed by other load), highest memory peak of each.
    validator, naive = (
        {**min(r, key=lambda x: x["wall"]), **{k: max(x[k] for x in r) for k in ("tree_rss_mb", "tree_pss_mb", "max_rss_mb")}}
        for r in (runs["validator"], runs["naive"])
    )
    assert validator["exit_code"] == 0 and validator["rows"] == naive["rows"], validator

    def row(name: str, r: dict) -> str:
        return (
            f"{name:<22} {r['wall']:8.1f} s  tree RSS {r['tree_rss_mb']:7.0f} MB  tree PSS "
            f"{r['tree_pss_mb']:7.0f} MB  max RSS {r['max_rss_mb']:7.0f} MB"
        )

    print(row("mrcr-validate (recount)", validator))
    print(row("naive loop", naive))
    speed = naive["wall"] / validator["wall"]
    rss = validator["tree_rss_mb"] / naive["tree_rss_mb"]
    pss = validator["tree_pss_mb"] / naive["tree_pss_mb"] if naive["tree_pss_mb"] else float("nan")
    single = validator["max_rss_mb"] / naive["max_rss_mb"]
    print(f"time ratio (naive / validator): {speed:.2f}x   target >= 1.6x: {'met' if speed >= 1.6 else 'MISSED'}")
    print(
        f"peak memory ratio (validator / naive): tree RSS {rss:.3f}, tree PSS {pss:.3f}, largest process "
        f"{single:.3f}   target <= 0.333 (tree RSS): {'met' if rss <= 1 / 3 else 'MISSED'}"
    )
    print(json.dumps({"validator": validator, "naive": naive, "time_ratio": speed, "tree_rss_ratio": rss,
                      "tree_pss_ratio": pss, "max_rss_ratio": single}, default=str))


if __name__ == "__main__":
    main()
