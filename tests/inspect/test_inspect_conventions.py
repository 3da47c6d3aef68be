"""Inspect's conventions, followed (issue 34, items 13-16): epochs reduced as Inspect reduces them,
exported logs that Inspect's own commands (`eval-retry`, `score`, `view`) take, one-line errors for
bad task arguments, and what an inspect_evals maintainer expects of a task (version, a default
dataset at a pinned revision, unscored rows, the data files' sha256, readable sample ids)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
from collections import defaultdict
from pathlib import Path

import pytest

from mrcr_gen import EvalConfig, run_eval
from mrcr_gen._api import summarize_run
from mrcr_gen._files import file_sha256
from tests.support.chat_server import ChatServer, Fault, first_needle, oracle, query_key
from tests.support.hub_server import FakeHub

from .conftest import ROOT, inspect_cli

pytest.importorskip("inspect_ai")

from inspect_ai import eval as inspect_eval
from inspect_ai.log import read_eval_log

from mrcr_gen.eval._subset import per_bin_rows
from mrcr_gen.inspect import export_run, mrcr, mrcr_dataset, read_inspect_log, summarize_inspect_log
from mrcr_gen.inspect._import import compare_paths, inspect_log_view
from mrcr_gen.recipes import RECIPES

API_KEY = "sk-test-inspect"
PINNED = "f4c69fae7cf81f7ca26b9fee34b392a50f6b8a1d"  # openai/mrcr's revision the task reads by default


def _run(task, log_dir: Path, policy, monkeypatch, model: str = "test-model", **eval_args):
    """The task through Inspect's OpenAI-compatible provider against the test server: (log, requests)."""
    from inspect_ai.model import get_model

    monkeypatch.setenv("LOCAL_API_KEY", API_KEY)
    with ChatServer(policy) as server:
        monkeypatch.setenv("LOCAL_BASE_URL", server.base_url)
        [log] = inspect_eval(
            task,
            model=get_model(f"openai-api/local/{model}", memoize=False),
            log_dir=str(log_dir),
            display="none",
            **eval_args,
        )
        requests = list(server.requests)
    return log, requests


def _offline_eval(args: list[str], log_dir: Path, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    """`inspect eval mrcr_gen/mrcr --model mockllm/model ARGS --log-dir LOG_DIR`, as a user types it."""
    command = ["eval", "mrcr_gen/mrcr", "--model", "mockllm/model", *args, "--log-dir", str(log_dir)]
    return inspect_cli(command, env, cwd)


def _metrics(log) -> dict[str, float]:
    return {name: m.value for name, m in log.results.scores[0].metrics.items()}


def _grade(sample, key: str) -> float:
    """A sample's official grade (`score`) or lenient grade (`lenient`), however the log holds them."""
    score = sample.scores["mrcr_scorer"]
    if isinstance(score.value, dict):
        return score.value[key]
    return score.value if key == "score" else score.metadata["score_lenient"]


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


# ------------------------------------------------------------------ 13: epochs


def test_epochs_every_metric_and_the_report_are_over_all_epochs(mrcr_data, tmp_path, monkeypatch, capsys):
    """Each row's first request gets the right writing, its second the first needle's: the two
    epochs differ, and `lenient`, like `mean`, is the mean over rows of each row's mean over its
    epochs (Inspect's mean reducer), not epoch 1's; `mrcr-eval report` and `view` of the log report
    those numbers, every epoch's tokens, and say so."""
    from mrcr_gen.cli import eval_main

    seen: dict[str, int] = defaultdict(int)
    lock = threading.Lock()

    def alternate(messages: list, request_json: dict) -> str:
        with lock:
            seen[query_key(messages)] += 1
            first = seen[query_key(messages)] == 1
        return (oracle if first else first_needle)(messages, request_json)

    files = sorted(mrcr_data.glob("*.parquet"))
    log, requests = _run(
        mrcr(data=[str(p) for p in files], needles="4,8"), tmp_path / "logs", alternate, monkeypatch, epochs=2
    )
    assert log.status == "success" and log.eval.config.epochs == 2
    by_row: dict[str, list] = defaultdict(list)
    for sample in log.samples:
        by_row[sample.id].append(sample)
    assert len(requests) == 2 * len(by_row) and all(len(epochs) == 2 for epochs in by_row.values())
    official = [_mean([_grade(s, "score") for s in epochs]) for epochs in by_row.values()]
    lenient = [_mean([_grade(s, "lenient") for s in epochs]) for epochs in by_row.values()]
    first_epoch = [_grade(s, "lenient") for s in log.samples if s.epoch == 1]
    metrics = _metrics(log)
    assert metrics["mean"] == pytest.approx(_mean(official))
    assert metrics["lenient"] == pytest.approx(_mean(lenient))
    assert _mean(first_epoch) != pytest.approx(_mean(lenient))  # the epochs differ: the test can tell
    for field, prefix in (("bin_upper", "bin_"), ("n_needles", "needles_")):  # every metric, by hand
        groups: dict[int, list[float]] = defaultdict(list)
        for epochs, row_mean in zip(by_row.values(), official, strict=True):
            groups[epochs[0].metadata[field]].append(row_mean)
        assert {f"{prefix}{key}": metrics[f"{prefix}{key}"] for key in groups} == pytest.approx(
            {f"{prefix}{key}": _mean(values) for key, values in groups.items()}
        )
    summary = summarize_inspect_log(log.location)
    assert sorted(b["mean_score"] for b in summary["bins"] if b["count"]) == pytest.approx(
        sorted(value for name, value in metrics.items() if name.startswith("bin_"))
    )
    assert (summary["auc_128k"], summary["auc_1m"]) == pytest.approx((metrics.get("auc_128k"), metrics.get("auc_1m")))
    assert summary["mean_score"] == pytest.approx(metrics["mean"])
    assert summary["mean_score_lenient"] == pytest.approx(metrics["lenient"])
    assert summary["n_rows"] == len(by_row)
    assert summary["usage"]["prompt_tokens"] == sum(s.output.usage.input_tokens for s in log.samples)
    assert summary["epochs_note"].startswith("2 epochs: each row's score and lenient grade are the mean")
    with pytest.raises(SystemExit) as info:
        eval_main(["report", log.location])
    assert info.value.code == 0
    assert "2 epochs: each row's score" in " ".join(capsys.readouterr().out.split())
    assert inspect_log_view(log.location).headline["epochs"] == summary["epochs_note"]


def test_an_inspect_run_with_cached_tokens_and_epochs_reads_back_as_billed(mrcr_data, tmp_path, monkeypatch):
    """Inspect's own run, two epochs, against a server that serves 60% of each prompt from its
    cache (item 12 through a real run): the log read back counts what the server billed (prompt
    tokens = Inspect's input + cache reads), as Inspect's own totals do, and the cost prices the
    cached tokens at the cached price."""
    monkeypatch.setenv("LOCAL_API_KEY", API_KEY)
    from inspect_ai.model import get_model

    with ChatServer("first_needle", cached_share=0.6) as server:
        monkeypatch.setenv("LOCAL_BASE_URL", server.base_url)
        [log] = inspect_eval(
            mrcr(data=str(mrcr_data / "a_small.parquet"), limit=4),
            model=get_model("openai-api/local/gpt-4.1-mini", memoize=False),
            log_dir=str(tmp_path / "logs"),
            display="none",
            epochs=2,
        )
        billed = dict(server.usage_sent)
    assert billed["cached_tokens"] > 0 and len(log.samples) == 8
    summary = summarize_inspect_log(log.location)
    assert summary["usage"] == billed | {"reasoning_tokens": 0}
    [inspects] = log.stats.model_usage.values()
    assert inspects.input_tokens + inspects.input_tokens_cache_read == billed["prompt_tokens"]
    uncached = billed["prompt_tokens"] - billed["cached_tokens"]
    expected = (uncached * 0.40 + billed["cached_tokens"] * 0.10 + billed["completion_tokens"] * 1.60) / 1e6
    assert summary["cost_usd"] == pytest.approx(expected)


# ------------------------------------------------------------------ 14: exported logs in Inspect


def _run_with_one_error(files: list[Path], out: Path, server: ChatServer) -> dict:
    config = EvalConfig(
        data=[str(p) for p in files], model="gpt-4.1-mini", out=str(out), base_url=server.base_url, max_retries=0
    )
    os.environ["OPENAI_API_KEY"] = API_KEY
    _, summary = run_eval(config)
    return summary


def test_an_exported_log_is_one_inspect_reads_retries_and_rescores(mrcr_data, tmp_path, inspect_env):
    """A run with one failed request, exported: the model is Inspect's `openai/MODEL` at the run's
    base URL, the failed row a sample error, the usage and cost in `model_usage`, the results the
    task's metrics under the task's names (stderr too) and the sample ids the task's; `inspect
    eval-retry` sends the failed row alone; `inspect score` finds the scorer and grades alike."""
    file = mrcr_data / "a_small.parquet"
    with ChatServer("first_needle", faults={1: Fault.server_error()}) as server:
        summary = _run_with_one_error([file], tmp_path / "run", server)
        assert summary["errors"]["count"] == 1 and summary["cost_usd"] > 0
        out = tmp_path / "exported" / "run.eval"
        export_run(tmp_path / "run", out)
        log = read_eval_log(str(out))
        assert (log.eval.model, log.eval.model_base_url) == ("openai/gpt-4.1-mini", server.base_url)
        failed = [s for s in log.samples if s.error is not None]
        assert len(failed) == 1 and failed[0].metadata["status"] == "error"
        usage = log.stats.model_usage["openai/gpt-4.1-mini"]
        assert usage.input_tokens == summary["usage"]["prompt_tokens"] > 0
        assert usage.output_tokens == summary["usage"]["completion_tokens"]
        assert usage.total_cost == pytest.approx(summary["cost_usd"])
        metrics = log.results.scores[0].metrics
        assert metrics["mean"].name == "mrcr_gen/mean" and metrics["mean"].value == pytest.approx(summary["mean_score"])
        assert metrics["stderr"].name == "mrcr_gen/stderr" and metrics["stderr"].value > 0
        assert log.eval.scorers[0].name == "mrcr_gen/mrcr_scorer"
        # Inspect's own commands, as a user runs them
        env = inspect_env | {"OPENAI_API_KEY": API_KEY}
        before = len(server.requests)
        done = inspect_cli(["eval-retry", str(out), "--log-dir", str(tmp_path / "retried")], env, tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]
        assert len(server.requests) == before + 1  # the failed row alone
        billed = dict(server.usage_sent)
    [retried_path] = (tmp_path / "retried").glob("*.eval")
    retried = read_eval_log(str(retried_path))
    assert retried.status == "success" and all(s.error is None for s in retried.samples)
    assert sorted(s.id for s in retried.samples) == sorted(s.id for s in log.samples)
    # `mrcr-eval report` of the retried log counts the retried row and its paid reply
    report = summarize_inspect_log(retried_path)
    assert (report["n_rows"], report["errors"]["count"]) == (summary["n_rows"], 0)
    assert report["usage"]["prompt_tokens"] == billed["prompt_tokens"] > summary["usage"]["prompt_tokens"]
    assert report["mean_score"] == pytest.approx(retried.results.scores[0].metrics["mean"].value)
    rescore = ["score", str(out), "--action", "overwrite", "--output-file", str(tmp_path / "rescored.eval")]
    done = inspect_cli(rescore, env, tmp_path)  # no --scorer: the log names it
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    rescored = {s.id: s.scores["mrcr_scorer"].value for s in read_eval_log(str(tmp_path / "rescored.eval")).samples}
    for sample in log.samples:
        if sample.metadata["status"] == "ok":
            assert rescored[sample.id]["score"] == pytest.approx(sample.scores["mrcr_scorer"].value["score"])
    # the same ids, metrics and metric names as the task itself writes
    done = _offline_eval(["-T", f"data={file}"], tmp_path / "task", inspect_env, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    [task_path] = (tmp_path / "task").glob("*.eval")
    task_log = read_eval_log(str(task_path))
    assert sorted(s.id for s in task_log.samples) == sorted(s.id for s in log.samples)
    exported_metadata = {s.id: s.metadata for s in log.samples}
    for sample in task_log.samples:  # the task's metadata, that `inspect score` reads, is all there
        assert set(sample.metadata) <= set(exported_metadata[sample.id]), sample.id
    names = {key: (m.name, m.group) for key, m in task_log.results.scores[0].metrics.items()}
    assert names == {key: (m.name, m.group) for key, m in metrics.items()}
    assert task_log.eval.scorers[0].metrics == log.eval.scorers[0].metrics


def test_a_score_graded_again_in_an_exported_log_is_the_one_reported(mrcr_data, tmp_path):
    """`inspect score` and Inspect's score edits change a sample's score, not the record the export
    keeps beside it: `mrcr-eval report` of the log reads the score the log now holds."""
    from inspect_ai.log import edit_score, write_eval_log
    from inspect_ai.scorer import ScoreEdit

    with ChatServer("first_needle") as server:
        summary = _run_with_one_error([mrcr_data / "a_small.parquet"], tmp_path / "run", server)
    out = tmp_path / "run.eval"
    export_run(tmp_path / "run", out)
    log = read_eval_log(str(out))
    sample = next(s for s in log.samples if s.scores["mrcr_scorer"].value["score"] < 1)
    edit = ScoreEdit(value={"score": 1.0, "lenient": 1.0})
    edit_score(log, sample.id, "mrcr_scorer", edit, recompute_metrics=False)
    write_eval_log(log, str(out))
    records, _ = read_inspect_log(out)
    [record] = [r for r in records if (r["file"], r["row"]) == (sample.metadata["file"], sample.metadata["row"])]
    assert (record["score"], record["score_lenient"]) == (1.0, 1.0)
    assert summarize_inspect_log(out)["mean_score"] > summary["mean_score"]


def test_inspect_logs_are_priced_in_compare(mrcr_data, tmp_path, monkeypatch):
    """A log of a model whose list price is known: `compare` (and `report`) show its cost."""
    log, _ = _run(
        mrcr(data=str(mrcr_data / "a_small.parquet"), limit=3),
        tmp_path / "logs",
        "oracle",
        monkeypatch,
        model="gpt-4.1-mini",
    )
    [entry] = compare_paths([log.location])
    usage = summarize_inspect_log(log.location)["usage"]
    expected = (usage["prompt_tokens"] * 0.40 + usage["completion_tokens"] * 1.60) / 1_000_000
    assert usage["prompt_tokens"] > 0 and entry["cost_usd"] == pytest.approx(expected)


# ------------------------------------------------------------------ 15: one-line errors


@pytest.mark.parametrize(
    ("argument", "message"),
    [
        ("bins=foo", "bins: expected a whole number, got 'foo'"),
        ("data=/nonexistent/x.parquet", "/nonexistent/x.parquet: no such file or directory"),
        ("control=everything", "control: 'everything' is not a control; choose among query-only"),
        ("tokenizer=o300k", "tokenizer: unknown tokenizer 'o300k': give a tiktoken encoding"),
        ("tokenizer=hf:/nonexistent", "tokenizer: hf:/nonexistent: no such file or folder"),
    ],
)
def test_a_bad_task_argument_is_one_line_without_a_traceback(mrcr_data, tmp_path, inspect_env, argument, message):
    # as a user sees it, on a terminal wide enough for the line (Inspect's console wraps at its width)
    env = {k: v for k, v in inspect_env.items() if k != "INSPECT_DISPLAY"} | {"COLUMNS": "400"}
    extra = [] if argument.startswith("data=") else ["-T", f"data={mrcr_data}"]
    done = _offline_eval([*extra, "-T", argument], tmp_path / "logs", env, tmp_path)
    shown = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert done.returncode != 0 and "Traceback" not in done.stdout + done.stderr
    assert len(shown) == 1 and message in shown[0], shown


# ------------------------------------------------------------------ 16: what inspect_evals expects


def test_version_description_data_sha256_readable_ids_and_rows_over_the_window_unscored(mrcr_data, tmp_path):
    files = sorted(mrcr_data.glob("*.parquet"))
    [log] = inspect_eval(
        mrcr(data=[str(p) for p in files], max_context_window=6000),
        model="mockllm/model",
        log_dir=str(tmp_path / "logs"),
        display="none",
    )
    assert log.eval.task_version == "2.0.0" and "openai/mrcr" in log.eval.task_description
    assert log.eval.metadata["data"] == [{"path": str(p), "sha256": file_sha256(p)} for p in files]
    skipped = [s for s in log.samples if s.metadata["status"] == "skipped"]
    sent = [s for s in log.samples if s.metadata["status"] == "ok"]
    assert skipped and sent
    for sample in log.samples:
        meta = sample.metadata
        assert sample.id == f"{Path(meta['file']).name}:{meta['row']}"
        assert meta["data_sha256"] == file_sha256(meta["file"]) and len(meta["digest"]) == 64
    for sample in skipped:
        score = sample.scores["mrcr_scorer"]
        assert math.isnan(score.value["score"]) and math.isnan(score.value["lenient"])
        assert score.reason == "over_context_window"
    mean = _mean([s.scores["mrcr_scorer"].value["score"] for s in sent])
    assert _metrics(log)["mean"] == pytest.approx(mean)
    records, run = read_inspect_log(log.location)
    assert {r["status"] for r in records} == {"ok", "skipped"} and run["data"] == log.eval.metadata["data"]


def _default_dataset(env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    code = """
from mrcr_gen.inspect._dataset import DataError, mrcr_dataset
try:
    dataset = mrcr_dataset(None, recipe="openai-mrcr")
except DataError as exc:
    print("ERROR", exc)
else:
    print(len(dataset), sorted(path.split("/snapshots/")[1] for path in dataset.files))
"""
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True, text=True, timeout=300)


def test_without_data_the_task_reads_openai_mrcr_at_its_pinned_revision(tmp_path, mrcr_data):
    """From the (fake) Hub at the pinned commit, not at its main branch; offline with nothing cached, one line."""
    hub = FakeHub()
    small = (mrcr_data / "a_small.parquet").read_bytes()
    hub.add_commit(
        "datasets",
        "openai/mrcr",
        {"2needle/2needle_0.parquet": small, "4needle/4needle_0.parquet": small},
        ref=None,
        sha=PINNED,
    )
    hub.add_commit("datasets", "openai/mrcr", {"8needle/8needle_0.parquet": small}, ref="main")
    env = dict(
        os.environ,
        PYTHONPATH=str(ROOT),
        HF_ENDPOINT=hub.url,
        HF_HOME=str(tmp_path / "hf"),
        HF_HUB_DISABLE_TELEMETRY="1",
    )
    with hub:
        done = _default_dataset(env, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[0] == "24", done.stdout
    assert f"{PINNED}/2needle/2needle_0.parquet" in done.stdout and "8needle" not in done.stdout
    offline = _default_dataset(env | {"HF_HOME": str(tmp_path / "empty"), "HF_HUB_OFFLINE": "1"}, tmp_path)
    [line] = offline.stdout.strip().splitlines()
    assert line.startswith(
        f"ERROR no -T data given, and the default dataset hf://datasets/openai/mrcr@{PINNED} "
        "cannot be read (offline? the Hub's cache empty?)"
    )
    assert line.endswith("pass -T data=PATH to read local files")


def test_per_bin_takes_the_rows_mrcr_eval_per_bin_takes(mrcr_data):
    files = [str(p) for p in sorted(mrcr_data.glob("*.parquet"))]
    shas = {path: file_sha256(path) for path in files}
    for seed in (0, 3):
        dataset = mrcr_dataset(files, recipe="openai-mrcr", per_bin=1, per_bin_seed=seed)
        expected = per_bin_rows(
            files, shas, 1, seed, recipes=RECIPES, tokenizer_spec="o200k_base", stored=lambda *_: None
        )
        assert {(s.metadata["file"], s.metadata["row"]) for s in dataset} == expected
        assert len(dataset) == 6  # 2 bins x 3 needle counts
    assert len(mrcr_dataset(files, recipe="openai-mrcr", per_bin=2, limit=5)) == 5  # limit after per_bin


def test_strip_think_and_extra_body(mrcr_data, tmp_path, monkeypatch):
    """strip_think is the scorer's argument (recorded: `inspect score` grades alike) and makes the
    run NOT official; the extra body goes into every request. (Inspect's OpenAI providers already
    move a leading <think> block out of the completion, into the reply's reasoning.)"""

    def thinking(messages: list, request_json: dict) -> str:
        return oracle(messages, request_json) + "<think>that was it</think>"

    task = mrcr(data=str(mrcr_data / "a_small.parquet"), limit=3, strip_think=True, extra_body={"top_k": 20})
    log, requests = _run(task, tmp_path / "logs", thinking, monkeypatch)
    assert len(requests) == 3 and all(r["top_k"] == 20 for r in requests)
    assert log.eval.scorers[0].options == {"strip_think": True}
    scores = [s.scores["mrcr_scorer"] for s in log.samples]
    assert [s.value["score"] for s in scores] == [1.0, 1.0, 1.0]
    assert all("NOT OFFICIAL" in s.explanation for s in scores)
    summary = summarize_inspect_log(log.location)
    assert summary["official"] is False and "NOT OFFICIAL" in summary["scoring"]


def test_control_query_only_sends_what_mrcr_eval_control_sends(mrcr_data, tmp_path, monkeypatch):
    file = mrcr_data / "a_small.parquet"
    task = mrcr(data=str(file), limit=3, control="query-only")
    log, requests = _run(task, tmp_path / "logs", lambda messages, body: "no idea", monkeypatch)
    with ChatServer(lambda messages, body: "no idea") as server:
        os.environ["OPENAI_API_KEY"] = API_KEY
        config = EvalConfig(
            data=[str(file)],
            model="m",
            out=str(tmp_path / "run"),
            base_url=server.base_url,
            limit=3,
            control="query-only",
        )
        run_eval(config)
        expected = list(server.requests)
    assert sorted(json.dumps(r["messages"]) for r in requests) == sorted(json.dumps(r["messages"]) for r in expected)
    assert all(r["messages"][-1]["content"].startswith("Prepend") and len(r["messages"]) < 5 for r in requests)
    for sample in log.samples:  # the floors are the whole row's, as mrcr-eval's control records them
        assert 0 < sample.scores["mrcr_scorer"].metadata["floor_random_needle"] < 1
    summary = summarize_inspect_log(log.location)
    assert summary["control"] == "query-only" and summary["scoring"].startswith("NOT A SCORE")
    assert summary["cells"][0]["floor_random_needle"] == pytest.approx(
        summarize_run(tmp_path / "run")["cells"][0]["floor_random_needle"]
    )


def test_report_takes_a_folder_of_logs(mrcr_data, tmp_path, capsys):
    from inspect_ai import Task
    from inspect_ai.dataset import Sample

    from mrcr_gen.cli import eval_main

    logs = tmp_path / "logs"
    for limit in (2, 3):
        inspect_eval(mrcr(data=str(mrcr_data), limit=limit), model="mockllm/model", log_dir=str(logs), display="none")
    inspect_eval(
        Task(dataset=[Sample(input="hi", target="x")], name="other"),
        model="mockllm/model",
        log_dir=str(logs),
        display="none",
    )
    capsys.readouterr()
    with pytest.raises(SystemExit) as info:
        eval_main(["report", str(logs)])
    assert info.value.code == 0
    out, err = capsys.readouterr()
    assert (
        out.count("AUC@128k") == 2 and "over 2 rows" in " ".join(out.split()) and "over 3 rows" in " ".join(out.split())
    )
    assert "skipped" in err and "a log of the task other" in err
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SystemExit) as info:
        eval_main(["report", str(empty)])
    assert info.value.code == 2


def test_an_exported_log_keeps_its_selection_for_eval_retry(mrcr_data, tmp_path):
    """The run's filters become the task's arguments, so a retried log selects the same rows."""
    with ChatServer("oracle") as server:
        config = EvalConfig(
            data=[str(p) for p in sorted(mrcr_data.glob("*.parquet"))],
            model="m",
            out=str(tmp_path / "run"),
            base_url=server.base_url,
            needles=[2],
            limit=3,
            per_bin=1,
            strip_think=True,
            extra_body={"top_k": 2},
        )
        os.environ["OPENAI_API_KEY"] = API_KEY
        run_eval(config)
    export_run(tmp_path / "run", tmp_path / "run.eval")
    args = read_eval_log(str(tmp_path / "run.eval"), header_only=True).eval.task_args_passed
    assert {k: v for k, v in args.items() if k != "data"} == {
        "needles": [2],
        "limit": 3,
        "per_bin": 1,
        "tokenizer": "o200k_base",
        "strip_think": True,
        "extra_body": {"top_k": 2},
    }
    dataset = mrcr_dataset(
        args.pop("data"),
        recipe="openai-mrcr",
        **{k: v for k, v in args.items() if k not in ("tokenizer", "strip_think", "extra_body")},
    )
    records = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    assert sorted((s.metadata["file"], s.metadata["row"]) for s in dataset) == sorted(
        (r["file"], r["row"]) for r in records
    )
