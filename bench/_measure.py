"""Shared by the benchmarks: run a command in a subprocess and measure its wall time and the peak
memory of its whole process tree; the seed's naive loop, the honest baseline."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil


def _tree(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return [proc]


def _sample(proc: psutil.Process, peaks: dict, stop: threading.Event, pss_every: int) -> None:
    """RSS (cheap: /proc/PID/statm) every 20 ms; PSS (reads /proc/PID/smaps, which costs CPU the
    measured processes then lack, more so with many workers) every `pss_every`-th sample, or never."""
    tick = 0
    while not stop.is_set():
        rss = pss = 0
        biggest = 0
        with_pss = pss_every > 0 and tick % pss_every == 0 and sys.platform.startswith("linux")
        for p in _tree(proc):
            try:
                one = p.memory_info().rss
                rss += one
                biggest = max(biggest, one)
                if with_pss:
                    pss += p.memory_full_info().pss
            except psutil.Error:
                pass
        peaks["rss"] = max(peaks["rss"], rss)
        peaks["pss"] = max(peaks["pss"], pss)
        peaks["largest"] = max(peaks["largest"], biggest)
        tick += 1
        stop.wait(0.02)


def measure(command: list[str], env: dict | None = None, pss_every: int = 0, memory: bool = True) -> dict:
    """Run `command`; wall seconds, peak tree RSS (and PSS, sampled every `pss_every`-th time)
    and largest process RSS in MB, and the JSON it printed on a line starting with RESULT.

    `memory=False` for a benchmark of time on all cores: the sampler takes about a tenth of a core,
    which a run using every core pays for and a one-core run does not."""
    start = time.perf_counter()
    proc = psutil.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    peaks = {"rss": 0, "pss": 0, "largest": 0}
    stop = threading.Event()
    sampler = threading.Thread(target=_sample, args=(proc, peaks, stop, pss_every), daemon=True)
    if memory:
        sampler.start()
    out, err = proc.communicate()
    wall = time.perf_counter() - start
    stop.set()
    if memory:
        sampler.join()
    if proc.returncode not in (0, 1):  # 1: the validator found something, still a full run
        raise SystemExit(f"{command} failed with exit code {proc.returncode}:\n{err[-2000:]}")
    result = {}
    for line in out.splitlines():
        if line.startswith("RESULT "):
            result = json.loads(line[7:])
    mb = 2**20
    return {**result, "wall": wall, "tree_rss_mb": peaks["rss"] / mb, "tree_pss_mb": peaks["pss"] / mb,
            "largest_rss_mb": peaks["largest"] / mb, "exit_code": proc.returncode}


def naive_loop(paths: list[str]) -> dict:
    """The seed's own single-threaded loop: pandas.read_parquet, json.loads, then
    len(enc.encode(m["content"])) for every message, plus the answer."""
    import pandas as pd

    from mrcr_gen import o200k

    enc = o200k()  # tiktoken.get_encoding("o200k_base"), with an offline fallback
    rows = tokens = 0
    for path in paths:
        df = pd.read_parquet(path)
        for prompt, answer in zip(df["prompt"], df["answer"]):
            messages = json.loads(prompt)
            tokens += sum(len(enc.encode(m["content"])) for m in messages) + len(enc.encode(answer))
            rows += 1
    return {"rows": rows, "tokens": tokens}


def naive_command(paths: list[Path]) -> list[str]:
    return [sys.executable, str(Path(__file__).with_name("_measure.py")), "naive", *map(str, paths)]


def eval_read_command(paths: list[Path]) -> list[str]:
    return [sys.executable, str(Path(__file__).with_name("_measure.py")), "eval-read", *map(str, paths)]


def eval_read(paths: list[str]) -> dict:
    """What mrcr-eval does with a data file before sending anything: its reader turns every row
    into an item (messages parsed, tokens counted); this measures that reader's memory."""
    try:
        from mrcr_gen import read_items  # every recipe's reader, through the registry
    except ImportError:  # an older layout: the shared row iterator
        from mrcr_gen import iter_rows

        def read_items(path):
            return iter_rows(path)

    rows = 0
    for path in paths:
        for _ in read_items(path):
            rows += 1
    return {"rows": rows}


if __name__ == "__main__":
    kind, *files = sys.argv[1:]
    print("RESULT " + json.dumps((naive_loop if kind == "naive" else eval_read)(files)), flush=True)
