"""Benchmark: peak RSS of `inspect eval mrcr_gen/mrcr --model mockllm/model` with the tasks' lazy
dataset, against the same task on a dataset loaded into a list of samples (`MemoryDataset`, what a
task that reads the file into samples does), and the size of Inspect's log per sample.

    python bench/bench_inspect_memory.py DATA.parquet [--limit 20] [--max-samples N] [--dir DIR]

DATA: e.g. `mrcr-gen --needles 8 --bin 1048576 --samples 100 --out DIR` (the 1M bin). Each mode
runs `inspect eval` in its own subprocess (peak RSS of the process tree, sampled every 20 ms);
the log goes to DIR/<mode>. Needs the [inspect] extra and the `inspect_ai` entry point (an
installed mrcr-gen; from a checkout, see tests/inspect/conftest.py).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parent))

from _measure import measure  # noqa: E402

EAGER_TASK = '''
from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset

from mrcr_gen.inspect._dataset import mrcr_dataset
from mrcr_gen.inspect._tasks import mrcr_generate, mrcr_scorer, task_metrics


@task
def mrcr_eager(data: str, limit: int | None = None) -> Task:
    lazy = mrcr_dataset(data, recipe="openai-mrcr", limit=limit)
    return Task(dataset=MemoryDataset(list(lazy)), solver=mrcr_generate(), scorer=mrcr_scorer(), metrics=task_metrics(None))
'''


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data")
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--max-samples", type=int, default=None)
    parser.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "mrcr-bench-inspect"))
    args = parser.parse_args()
    out = Path(args.dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "eager_task.py").write_text(EAGER_TASK)
    inspect = str(Path(sys.executable).with_name("inspect"))
    common = ["--model", "mockllm/model", "-T", f"data={args.data}", "-T", f"limit={args.limit}", "--display", "none"]
    if args.max_samples:
        common += ["--max-samples", str(args.max_samples)]
    modes = {
        "lazy": [inspect, "eval", "mrcr_gen/mrcr", *common],
        "eager": [inspect, "eval", str(out / "eager_task.py@mrcr_eager"), *common],
    }
    report = {}
    for mode, command in modes.items():
        logs = out / mode
        for old in logs.glob("*.eval"):
            old.unlink()
        result = measure([*command, "--log-dir", str(logs)])
        [log] = logs.glob("*.eval")
        report[mode] = {
            "peak_rss_mb": round(result["tree_rss_mb"]),
            "wall_s": round(result["wall"], 1),
            "log_mb": round(log.stat().st_size / 2**20, 1),
            "log_mb_per_sample": round(log.stat().st_size / 2**20 / args.limit, 2),
        }
        print(mode, json.dumps(report[mode]), flush=True)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
