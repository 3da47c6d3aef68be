"""Benchmark: `mrcr-eval`'s request path against the seed's loop, and its concurrency.

    python bench/bench_eval_start.py                  # both jobs at full size (a few minutes)
    python bench/bench_eval_start.py --long-rows 8 --short-rows 128 --concurrency 8 64   # quicker

Data (built once with mrcr-gen's offline writer under --dir, default $TMPDIR/mrcr-bench-eval-start):
--long-rows rows of the 1M bin (4 needles) and --short-rows rows of the 8k and 16k bins, half each.
The server is the project's test server (tests/support/chat_server.py, oracle policy) in its own
process; it notes when the first request arrived and how long every request stayed in it.

  - long job: `mrcr-eval --concurrency 8 --max-context-window 1048576` on the 1M rows against the
    server answering at once, and the seed's loop (the dataset card's: pandas.read_parquet, then per
    row json.loads, tiktoken over each message, skip over the window, the synchronous openai client's
    chat.completions.create, the grade) on the same rows and server, in two interleaved rounds.
    Targets: total <= 0.5x the loop's; first request no later than the loop's.
  - short job: `mrcr-eval --concurrency C` on the short rows against the server answering each
    request after --delay seconds (1 s; --jitter varies it): requests in flight on average
    (server-side: the seconds requests spent in the server over the span from the first arrival to
    the last answer), and rows per second, by the wall clock of the command and by the requests' own
    span (first arrival to last answer; the command goes on after it until its grades are written).
    Target: at --concurrency 64, >= 48 in flight; rows/s grow with C until the server is the limit
    (whole waves of C requests, each --delay long: rows / (ceil(rows / C) * delay) a second). The
    client's turnaround is the time from an answer to the arrival of the request that took its slot,
    from the server's timeline: what the runner costs per request, the server's time apart. Each run also
    prints the CPU time of mrcr-eval's own process and of the server, and how busy the machine's cores
    were over the run (/proc/stat): with the cores about all busy, the machine is the limit.
  - pool job: the pool builder's client path (`build_pool_openai`, short asks) at --concurrency 64
    against the same 1 s server: in flight on average and writings per second.

`--code DIR` runs mrcr-eval from another checkout's `mrcr_gen` (e.g. `git archive main mrcr_gen`
unpacked in DIR) to measure before and after with the same data and server.
Timings are upper bounds on a loaded machine: the server, the client and the loop share its cores.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODEL = "test-model"
WINDOW = 1048576


# --------------------------------------------------------------------------- the seed's loop


def seed_loop(base_url: str, window: int, paths: list[str]) -> dict:
    """The openai/mrcr dataset card's loop, as written there (sync client, one row after another)."""
    from difflib import SequenceMatcher

    import pandas as pd
    from openai import OpenAI

    from mrcr_gen import o200k

    def grade(response: str, answer: str, random_string_to_prepend: str) -> float:
        if not response.startswith(random_string_to_prepend):
            return 0
        response = response.removeprefix(random_string_to_prepend)
        answer = answer.removeprefix(random_string_to_prepend)
        return float(SequenceMatcher(None, response, answer).ratio())

    enc = o200k()  # tiktoken.get_encoding("o200k_base"), with an offline fallback

    def n_tokens(messages: list[dict]) -> int:
        return sum([len(enc.encode(m["content"])) for m in messages])

    client = OpenAI(base_url=base_url, api_key="EMPTY")
    dataset = pd.concat([pd.read_parquet(path) for path in paths])
    scores = []
    for _, row in dataset.iterrows():
        messages = json.loads(row["prompt"])
        if n_tokens(messages) > window:
            continue
        completion = client.chat.completions.create(model=MODEL, messages=messages)
        response = completion.choices[0].message.content
        scores.append(grade(response, row["answer"], row["random_string_to_prepend"]))
    return {"rows": len(scores), "mean_score": sum(scores) / max(len(scores), 1)}


# --------------------------------------------------------------------------- data and server


def build(directory: Path, name: str, bins: tuple[int, ...], rows: int) -> list[Path]:
    """`rows` rows (split over `bins`) of 4 needles, generated once."""
    from mrcr_gen import GenerateConfig, OfflineWriter, bin_by_upper, generate_dataset

    out = directory / f"{name}-{rows}"
    done = out / "done"
    if not done.exists():
        shutil.rmtree(out, ignore_errors=True)
        print(f"generating {rows} rows of {bins} in {out} ...", file=sys.stderr, flush=True)
        config = GenerateConfig(
            needles=(4,), bins=tuple(bin_by_upper(b) for b in bins), samples=-(-rows // len(bins)), seed=3, out=out
        )
        generate_dataset(config, OfflineWriter(config.seed))
        done.touch()
    return sorted(out.rglob("*.parquet"))


class Server:
    """tests/support/chat_server.py in its own process, answering after `delay` seconds (`echo`: the
    last user message, a writing for the pool builder)."""

    def __init__(self, delay: float, policy: str = "oracle", jitter: float = 0.0):
        command = [sys.executable, "-m", "tests.support.chat_server", "--port", "0", "--delay", str(delay)]
        command += ["--jitter", str(jitter)]
        command += ["--policy", policy]
        self.proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if not line.startswith("PORT "):
            raise SystemExit(f"the test server did not start: {line!r}")
        self.root = f"http://127.0.0.1:{int(line.split()[1])}"
        self.base_url = self.root + "/v1"

    def call(self, method: str, path: str) -> dict:
        request = urllib.request.Request(self.root + path, method=method, data=b"" if method == "POST" else None)
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.loads(response.read())

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.kill()
        self.proc.wait()

    def cpu_seconds(self) -> float:
        """CPU time (user + system) the server process has used so far (Linux's /proc; 0 elsewhere)."""
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def children_cpu_seconds() -> float:
    """CPU time of this process's children that have ended, and of the descendants they waited for
    (not mrcr-eval's grading processes: their fork server's children, never waited for by mrcr-eval)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def machine_jiffies() -> tuple[int, int]:
    """(busy, all) clock ticks of every core so far, from Linux's /proc/stat ((0, 0) elsewhere)."""
    try:
        ticks = [int(n) for n in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    idle = ticks[3] + ticks[4]  # idle, iowait
    return sum(ticks[:8]) - idle, sum(ticks[:8])


class TreeCpu:
    """CPU seconds (user + system) of a process and all its descendants, its grading and counting
    processes included (children of a fork server it never waits for, which RUSAGE_CHILDREN
    misses): each process's own times, sampled every `every` seconds until it ends (a process's
    last interval before it ends is lost: some milliseconds)."""

    def __init__(self, pid: int, every: float = 0.05):
        import psutil

        self._root, self._every, self._seen = psutil.Process(pid), every, {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        import psutil

        while not self._stop.is_set():
            try:
                tree = [self._root, *self._root.children(recursive=True)]
            except psutil.Error:
                tree = [self._root]
            for process in tree:
                try:
                    times = process.cpu_times()
                    self._seen[process.pid] = times.user + times.system
                except psutil.Error:
                    pass
            self._stop.wait(self._every)

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return sum(self._seen.values())


def timed(server: Server, command: list[str], env: dict) -> dict:
    """Run `command` against a freshly reset server: wall time, when its first request arrived
    (from the command's start), requests in flight on average and requests per second, and the
    CPU seconds of the command's process tree (`tree_cpu`) and of the server."""
    server.call("POST", "/reset")
    server_cpu, command_cpu, (busy, ticks) = server.cpu_seconds(), children_cpu_seconds(), machine_jiffies()
    started = time.time()
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    tree = TreeCpu(process.pid)
    stdout, stderr = process.communicate()
    wall = time.time() - started
    proc = subprocess.CompletedProcess(command, process.returncode, stdout, stderr)
    busy_after, ticks_after = machine_jiffies()
    cpu = {
        "tree_cpu": tree.stop(),
        "command_cpu": children_cpu_seconds() - command_cpu,
        "server_cpu": server.cpu_seconds() - server_cpu,
        # every core's busy share over the run (the graders, and anything else running, included)
        "machine_busy": (busy_after - busy) / max(ticks_after - ticks, 1),
    }
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{command[:4]} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    stats = server.call("GET", "/stats")
    result = {"wall": wall, "requests": stats["completed_requests"]} | cpu
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            result |= json.loads(line[7:])
    if stats["first_request_at"] is not None:
        span = max(stats["last_answered_at"] - stats["first_request_at"], 1e-9)
        result |= {
            "first_request": stats["first_request_at"] - started,
            "mean_in_flight": stats["busy_seconds"] / span,
            "max_in_flight": stats["max_in_flight"],
            "per_second": stats["completed_requests"] / wall,
            # the requests' own pace: the run goes on after the last answer until its grades are written
            "answered_per_second": stats["completed_requests"] / span,
        }
    return result


def turnaround(server: Server, concurrency: int) -> list[float]:
    """Seconds from each answer to the arrival of the request that took its slot (the k-th answer's
    slot goes to request k + C): the client's own time per request, read off the server's timeline."""
    timeline = server.call("GET", "/timeline")
    answered = sorted(entry[4] for entry in timeline)
    arrived = sorted(entry[2] for entry in timeline)  # began to be read
    return [arrived[k + concurrency] - answered[k] for k in range(len(arrived) - concurrency)]


def server_limit(rows: int, concurrency: int, delay: float) -> float:
    """Answers per second of a client that costs nothing: whole waves of C requests, each `delay`
    long (600 rows at C 64 are 10 waves, so 60 a second, not 64)."""
    return rows / (-(-rows // concurrency) * delay)


def eval_command(server: Server, paths: list[Path], out: Path, concurrency: int, window: int | None) -> list[str]:
    shutil.rmtree(out, ignore_errors=True)
    command = [sys.executable, "-c", "from mrcr_gen.cli import eval_main; eval_main()", *map(str, paths)]
    command += ["--model", MODEL, "--base-url", server.base_url, "--out", str(out), "-c", str(concurrency)]
    return command + ([] if window is None else ["--max-context-window", str(window)])


def eval_mean_score(out: Path) -> float | None:
    summary = out / "summary.json"
    return json.loads(summary.read_text())["mean_score"] if summary.exists() else None


# --------------------------------------------------------------------------- jobs


def long_job(args: argparse.Namespace, env: dict, work: Path) -> dict:
    paths = build(args.dir, "long", (1048576,), args.long_rows)
    seed = [sys.executable, __file__, "seed", "--base-url", "{url}", *map(str, paths)]
    rounds: dict[str, list[dict]] = {"seed loop": [], "mrcr-eval -c 8": []}
    with Server(0.0) as server:
        for _ in range(args.rounds):
            loop = [part.replace("{url}", server.base_url) for part in seed]
            rounds["seed loop"].append(timed(server, loop, env))
            out = work / "long"
            run = timed(server, eval_command(server, paths, out, 8, WINDOW), env)
            rounds["mrcr-eval -c 8"].append(run | {"mean_score": eval_mean_score(out)})
    report = {}
    for name, runs in rounds.items():
        report[name] = {
            "wall": statistics.median(r["wall"] for r in runs),
            "first_request": statistics.median(r["first_request"] for r in runs),
            "walls": [round(r["wall"], 2) for r in runs],
            "firsts": [round(r["first_request"], 2) for r in runs],
            "requests": runs[-1]["requests"],
            "mean_score": runs[-1].get("mean_score"),
            "tree_cpu": statistics.median(r["tree_cpu"] for r in runs),
            "server_cpu": statistics.median(r["server_cpu"] for r in runs),
        }
    seed_wall = report["seed loop"]["wall"]
    report["ratio"] = report["mrcr-eval -c 8"]["wall"] / seed_wall
    print(f"\nlong job: {args.long_rows} rows of the 1M bin, server answering at once, {args.rounds} rounds (median)")
    for name in rounds:
        r = report[name]
        print(
            f"  {name:16} total {r['wall']:6.2f} s {r['walls']}  first request after {r['first_request']:5.2f} s "
            f"{r['firsts']}  requests {r['requests']}  mean score {r['mean_score']}"
        )
        print(f"  {'':16} CPU: its process tree {r['tree_cpu']:5.2f} s, the server {r['server_cpu']:5.2f} s")
    print(f"  ratio mrcr-eval / seed loop: {report['ratio']:.3f} (target <= 0.5)")
    return report


def short_job(args: argparse.Namespace, env: dict, work: Path) -> dict:
    paths = build(args.dir, "short", (8192, 16384), args.short_rows)
    report = {}
    jitter = f" +- up to {args.jitter} s" if args.jitter else ""
    print(f"\nshort job: {args.short_rows} rows of the 8k and 16k bins, server answering after {args.delay} s{jitter}")
    with Server(args.delay, jitter=args.jitter) as server:
        for concurrency in args.concurrency:
            run = timed(server, eval_command(server, paths, work / f"short-{concurrency}", concurrency, None), env)
            gaps = sorted(turnaround(server, concurrency)) or [0.0]
            run |= {"turnaround_mean": statistics.mean(gaps), "turnaround_p90": gaps[int(0.9 * len(gaps))]}
            report[concurrency] = run
            # --delay 0: no server limit, the runner's own ceiling
            # --jitter: no whole waves, the requests' mean pace
            limit = (
                "none" if args.delay <= 0 else f"{concurrency / args.delay:.1f}" if args.jitter
                else f"{server_limit(args.short_rows, concurrency, args.delay):.1f}"
            )
            print(
                f"  --concurrency {concurrency:3}: {run['wall']:6.2f} s, {run['per_second']:6.2f} rows/s "
                f"(answered {run['answered_per_second']:6.2f}/s, server limit {limit}), "
                f"in flight {run['mean_in_flight']:5.1f} on average, {run['max_in_flight']} at most"
            )
            print(
                f"{'':20}client turnaround (an answer to the next request's arrival): "
                f"{1000 * run['turnaround_mean']:.1f} ms on average, {1000 * run['turnaround_p90']:.1f} ms p90"
            )
            # With the cores about all busy, the machine is the limit, whichever part is leaner.
            per_row = 1000 * run["tree_cpu"] / args.short_rows
            print(
                f"{'':20}CPU: mrcr-eval's process tree {run['tree_cpu']:5.1f} s ({per_row:.0f} ms a row), "
                f"server {run['server_cpu']:4.1f} s; the cores {run['machine_busy']:.0%} busy over the run"
            )
    return report


def pool_job(args: argparse.Namespace, env: dict, work: Path) -> dict:
    command = [sys.executable, __file__, "pool", "--base-url", "{url}", "--asks", str(args.pool_asks)]
    command += ["--out", str(work / "pool.parquet"), "--cache", str(work / "pool-cache")]
    with Server(args.delay, policy="echo") as server:  # a writing: the ask itself
        shutil.rmtree(work / "pool-cache", ignore_errors=True)
        run = timed(server, [part.replace("{url}", server.base_url) for part in command], env)
    print(
        f"\npool job: {args.pool_asks} writings, --concurrency 64, server answering after {args.delay} s: "
        f"{run['wall']:.2f} s, {run['per_second']:.2f} writings/s, in flight {run['mean_in_flight']:.1f} on average"
    )
    return run


def pool_build(base_url: str, asks: int, out: str, cache: str) -> dict:
    from mrcr_gen import build_pool_openai
    from mrcr_gen._models import Ask

    variants = {Ask(format="poem", entity=f"tapir number {i}"): 1 for i in range(asks)}
    report = build_pool_openai(MODEL, variants, concurrency=64, base_url=base_url, out=out, cache_dir=cache,
                               progress=False)
    return {"written": report.written}


def code_env(code: Path | None) -> dict:
    """The environment of the commands: `code`'s mrcr_gen (a checkout; default this one) first."""
    env = dict(os.environ)
    path = [str((code or ROOT).resolve()), str(ROOT), *filter(None, [env.get("PYTHONPATH")])]
    env["PYTHONPATH"] = os.pathsep.join(path)
    # The commands run as `python -c` from ROOT, whose mrcr_gen would come first on sys.path and
    # shadow --code's: without the current folder on the path, PYTHONPATH decides.
    env["PYTHONSAFEPATH"] = "1"
    return env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--long-rows", type=int, default=60)
    parser.add_argument("--short-rows", type=int, default=600)
    parser.add_argument("--pool-asks", type=int, default=640)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[4, 16, 64])
    parser.add_argument("--delay", type=float, default=1.0, help="seconds the server takes per request (short job)")
    parser.add_argument("--jitter", type=float, default=0.0, help="each request takes --delay +- up to this (short job)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--jobs", nargs="+", default=["long", "short", "pool"], choices=["long", "short", "pool"])
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "mrcr-bench-eval-start")
    parser.add_argument("--code", type=Path, help="a checkout whose mrcr_gen mrcr-eval runs (default: this one)")
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    env = code_env(args.code)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for job in args.jobs:
            results[job] = {"long": long_job, "short": short_job, "pool": pool_job}[job](args, env, Path(tmp))
    print("RESULT " + json.dumps(results, default=str))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in ("seed", "pool"):
        sub = argparse.ArgumentParser()
        sub.add_argument("kind")
        sub.add_argument("--base-url", required=True)
        sub.add_argument("--asks", type=int, default=0)
        sub.add_argument("--out")
        sub.add_argument("--cache")
        sub.add_argument("files", nargs="*")
        a = sub.parse_intermixed_args()
        if a.kind == "seed":
            print("RESULT " + json.dumps(seed_loop(a.base_url, WINDOW, a.files)), flush=True)
        else:
            print("RESULT " + json.dumps(pool_build(a.base_url, a.asks, a.out, a.cache)), flush=True)
    else:
        main()
