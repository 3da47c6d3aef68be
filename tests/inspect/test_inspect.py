"""MRCR inside Inspect: the tasks run by `inspect eval` (mockllm offline, and Inspect's
OpenAI-compatible provider against the test server) score what mrcr-eval scores on the same rows;
run directories and Inspect logs convert both ways; the default install never imports inspect_ai."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mrcr_gen import EvalConfig, run_eval
from mrcr_gen._api import summarize_run
from mrcr_gen.recipes import recipe_named
from tests.support.browser import open_browser
from tests.support.chat_server import ChatServer

from .conftest import ROOT, inspect_cli

API_KEY = "sk-test-inspect"


# ------------------------------------------------------------------ the default install


def test_the_default_install_never_imports_inspect_ai(tmp_path, mrcr_data):
    """mrcr_gen, every console entry point's help and a report of a run: inspect_ai stays unloaded."""
    run = tmp_path / "run"
    (run).mkdir()
    (run / "results.jsonl").write_text("")
    code = f"""
import sys, contextlib, io
import mrcr_gen, mrcr_gen.cli
from mrcr_gen.cli import eval_main, gen_main
for main, args in ((eval_main, ["--help"]), (eval_main, ["report", {str(run)!r}]),
                   (eval_main, ["export-inspect", "--help"]), (gen_main, ["--help"])):
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            main(args)
        except SystemExit:
            pass
print(sorted(m for m in sys.modules if m == "inspect_ai" or m.startswith("inspect_ai.")))
"""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"


inspect_ai = pytest.importorskip("inspect_ai")

from inspect_ai import eval as inspect_eval  # noqa: E402
from inspect_ai.log import read_eval_log  # noqa: E402

from mrcr_gen.inspect import export_run, mrcr, mrcr_dataset, mrcr_v2, read_inspect_log, summarize_inspect_log  # noqa: E402
from mrcr_gen.inspect._dataset import DataError  # noqa: E402


def _mrcr_eval(data: list[Path], out: Path, policy: str, **options) -> tuple[dict, list[dict]]:
    with ChatServer(policy) as server:
        config = EvalConfig(
            data=[str(p) for p in data], model="test-model", out=str(out), base_url=server.base_url, **options
        )
        os.environ["OPENAI_API_KEY"] = API_KEY
        _, summary = run_eval(config)
        requests = list(server.requests)
    return summary, requests


def _inspect_run(task, log_dir: Path, policy: str, monkeypatch) -> tuple[object, list[dict]]:
    """Inspect's OpenAI-compatible provider (`openai-api/SERVICE/MODEL`, SERVICE_API_KEY and
    SERVICE_BASE_URL) against the test server; a model of its own for each run (get_model
    memoizes by name, and the last test's server is gone)."""
    from inspect_ai.model import get_model

    monkeypatch.setenv("LOCAL_API_KEY", API_KEY)
    with ChatServer(policy) as server:
        monkeypatch.setenv("LOCAL_BASE_URL", server.base_url)
        model = get_model("openai-api/local/test-model", memoize=False)
        [log] = inspect_eval(task, model=model, log_dir=str(log_dir), display="none")
        requests = list(server.requests)
    return log, requests


def _scores_by_row(records: list[dict]) -> dict[tuple[str, int], tuple[str, float | None]]:
    return {(r["file"], r["row"]): (r["status"], None if r.get("score") is None else round(r["score"], 12)) for r in records}


def _same_numbers(summary: dict, expected: dict) -> None:
    for key in ("mean_score", "mean_score_answered", "auc_128k", "auc_1m", "mean_128k", "n_rows", "n_scored"):
        assert summary[key] == pytest.approx(expected[key]), key
    assert [(b["bin"], b["count"], b["skipped"]) for b in summary["bins"]] == [
        (b["bin"], b["count"], b["skipped"]) for b in expected["bins"]
    ]
    assert [b["mean_score"] for b in summary["bins"]] == pytest.approx([b["mean_score"] for b in expected["bins"]])
    assert [(c["bin"], c["n_needles"], round(c["mean_score"], 12)) for c in summary["cells"]] == [
        (c["bin"], c["n_needles"], round(c["mean_score"], 12)) for c in expected["cells"]
    ]


# ------------------------------------------------------------------ scores equal mrcr-eval's


def test_openai_provider_scores_equal_mrcr_eval_with_a_window_inside_a_bin(mrcr_data, tmp_path, monkeypatch):
    """first_needle replies score between 0 and 1; a window of 6000 tokens skips some rows of the
    (4096, 8192] bin: the per-row scores, the mean (skipped rows left out), the bin means and the
    AUCs (skipped rows 0) are mrcr-eval's, in the log's metrics and read back from the log."""
    files = sorted(mrcr_data.glob("*.parquet"))
    window = 6000
    expected, ours_requests = _mrcr_eval(files, tmp_path / "run", "first_needle", max_context_window=window)
    assert expected["skipped"]["count"] > 0 and 0 < expected["mean_score"] < 1
    log, requests = _inspect_run(
        mrcr(data=[str(p) for p in files], max_context_window=window), tmp_path / "logs", "first_needle", monkeypatch
    )
    assert log.status == "success"
    records, run = read_inspect_log(log.location)
    ours = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    assert _scores_by_row(records) == _scores_by_row(ours)
    summary = summarize_inspect_log(log.location)
    _same_numbers(summary, expected)
    metrics = {name: m.value for name, m in log.results.scores[0].metrics.items()}
    assert metrics["mean"] == pytest.approx(expected["mean_score"])
    assert metrics["lenient"] == pytest.approx(expected["mean_score_lenient"])
    # bins beyond the window count 0: the AUCs are defined, and small
    assert 0 < expected["auc_128k"] < 0.1 and 0 < expected["auc_1m"] < expected["auc_128k"]
    assert (metrics["auc_128k"], metrics["auc_1m"]) == pytest.approx((expected["auc_128k"], expected["auc_1m"]))
    upper = {r["bin"]: r["bin_upper"] for r in ours}
    bins = {f"bin_{upper[b['bin']]}": b["mean_score"] for b in expected["bins"]}
    assert {k: v for k, v in metrics.items() if k.startswith("bin_")} == pytest.approx(bins)
    needles = {f"needles_{n['n_needles']}": n["mean_score"] for n in expected["by_needles"]}
    assert {k: v for k, v in metrics.items() if k.startswith("needles_")} == pytest.approx(needles)
    # the same requests: the row's messages exactly, and no sampling parameter of our own
    assert sorted(json.dumps(r["messages"]) for r in requests) == sorted(json.dumps(r["messages"]) for r in ours_requests)
    for request in requests:
        assert not {"temperature", "top_p", "max_tokens", "max_completion_tokens", "seed"} & set(request)
        assert request["messages"][0]["role"] != "system"


def test_mrcr_v2_scores_equal_mrcr_eval(v2_data, tmp_path, monkeypatch):
    files = sorted(v2_data.rglob("*.csv"))
    assert all("," in f.name for f in files)  # upstream's names, e.g. mrcr_v2_2needle_in_(4096,8192).csv
    expected, _ = _mrcr_eval(files, tmp_path / "run", "first_needle")
    log, requests = _inspect_run(mrcr_v2(data=[str(f) for f in files]), tmp_path / "logs", "first_needle", monkeypatch)
    assert all(len(r["messages"]) == 1 and r["messages"][0]["role"] == "user" for r in requests)
    records, _ = read_inspect_log(log.location)
    ours = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    assert _scores_by_row(records) == _scores_by_row(ours)
    _same_numbers(summarize_inspect_log(log.location), expected)
    lenient = {(r["file"], r["row"]): r["score_lenient"] for r in ours}
    assert {(r["file"], r["row"]): r["score_lenient"] for r in records} == pytest.approx(lenient)


# ------------------------------------------------------------------ inspect eval, offline


def test_inspect_eval_cli_with_mockllm_offline(mrcr_data, tmp_path, inspect_env):
    """`inspect eval mrcr_gen/mrcr --model mockllm/model -T ...` as a user types it."""
    done = inspect_cli(
        ["eval", "mrcr_gen/mrcr", "--model", "mockllm/model", "-T", f"data={mrcr_data / 'b_gen.parquet'}",
         "-T", "needles=2,8", "-T", "limit=3", "--log-dir", str(tmp_path / "logs")],
        inspect_env, tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    [path] = sorted((tmp_path / "logs").glob("*.eval"))
    log = read_eval_log(str(path))
    assert log.eval.task == "mrcr_gen/mrcr" and len(log.samples) == 3
    recipe = recipe_named("openai-mrcr")
    for sample in log.samples:
        meta = sample.metadata
        assert sample.id == f"b_gen.parquet:{meta['row']}" and len(meta["digest"]) == 64
        assert meta["n_needles"] in (2, 8) and meta["bin"] == "[4096, 8192]"
        assert 0 <= meta["target_depth"] < 1 and meta["random_string"] and meta["file"].endswith("b_gen.parquet")
        reply = sample.output.completion
        assert sample.scores["mrcr_scorer"].value["score"] == recipe.grade(
            reply, _item(meta, sample.target)
        )
    assert summarize_inspect_log(path)["n_rows"] == 3


def _item(meta: dict, target: str):
    from mrcr_gen.eval._items import EvalItem

    return EvalItem(source=meta["file"], row=meta["row"], digest=meta["digest"], answer=target,
                    prefix=meta["random_string"], recipe=meta["recipe"])


# ------------------------------------------------------------------ the dataset


def test_the_dataset_keeps_no_messages_in_memory_and_builds_each_sample_on_demand(mrcr_data):
    dataset = mrcr_dataset(str(mrcr_data), recipe="openai-mrcr", bins="8192")
    assert len(dataset) == 6
    assert all(not hasattr(row, "messages") and row.metadata["bin_upper"] == 8192 for row in dataset._rows)
    first, again = dataset[0], dataset[0]
    assert first is not again and first.input == again.input and len(first.input) > 10
    assert [s.id for s in dataset[1:3]] == [dataset[1].id, dataset[2].id]
    assert len(dataset.filter(lambda s: s.metadata["n_needles"] == 2)) == 2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"data": "/nonexistent/x.parquet"}, "/nonexistent/x.parquet: no such file or directory"),
        ({"bins": 100}, "bins: no openai-mrcr bin has upper edge 100"),
        ({"needles": 3}, "no row of"),
        ({"bins": "foo"}, "bins: expected a whole number, got 'foo'"),
        ({"needles": "2,x"}, "needles: expected a whole number, got 'x'"),
        ({"limit": 0}, "limit: expected a whole number of at least 1, got 0"),
        ({"per_bin": "many"}, "per_bin: expected a whole number, got 'many'"),
        ({"max_context_window": [1]}, "max_context_window: expected a whole number, got [1]"),
        ({"control": "none"}, "control: 'none' is not a control; choose among query-only"),
    ],
)
def test_bad_task_arguments_are_one_line_errors(mrcr_data, kwargs, message):
    args = {"data": str(mrcr_data), **kwargs}
    with pytest.raises(DataError) as info:
        mrcr_dataset(args.pop("data"), recipe="openai-mrcr", **args)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_no_data_for_a_recipe_without_a_default_dataset_is_one_line(v2_data):
    with pytest.raises(DataError) as info:
        mrcr_dataset(None, recipe="mrcr-v2")
    assert str(info.value).startswith("no data: pass -T data=PATH")


def test_a_file_of_the_other_recipe_names_the_right_task(v2_data):
    with pytest.raises(DataError, match="run it with the task mrcr_gen/mrcr_v2"):
        mrcr_dataset(str(v2_data), recipe="openai-mrcr")


# ------------------------------------------------------------------ export and import


def test_export_then_import_gives_the_runs_summary_and_inspect_reads_it(mrcr_data, tmp_path, capsys):
    from mrcr_gen.cli import eval_main

    files = sorted(mrcr_data.glob("*.parquet"))
    _mrcr_eval(files, tmp_path / "run", "first_needle", max_context_window=6000)
    out = tmp_path / "run.eval"
    with pytest.raises(SystemExit) as info:
        eval_main(["export-inspect", str(tmp_path / "run"), "-o", str(out)])
    assert info.value.code == 0
    log = read_eval_log(str(out))
    expected = summarize_run(tmp_path / "run")
    assert len(log.samples) == expected["n_rows"] + expected["skipped"]["count"]
    sent = [s for s in log.samples if s.metadata["status"] == "ok"]
    assert all(isinstance(s.input, list) and s.input[-1].role == "user" for s in sent)
    # the per-row analysis goes along where the run recorded one
    assert all(s.scores["mrcr_scorer"].metadata["analysis"] == s.metadata["mrcr_record"].get("analysis") for s in sent)
    assert all(s.scores["mrcr_scorer"].value["score"] == s.metadata["mrcr_record"]["score"] for s in sent)
    assert log.results.scores[0].metrics["mean"].value == pytest.approx(expected["mean_score"])
    assert summarize_inspect_log(out) == expected  # the round trip is exact
    capsys.readouterr()
    with pytest.raises(SystemExit) as info:
        eval_main(["compare", str(tmp_path / "run"), str(out), "--json"])
    assert info.value.code == 0
    first, second = json.loads(capsys.readouterr().out)
    assert {k: v for k, v in first.items() if k != "run"} == {k: v for k, v in second.items() if k != "run"}
    with pytest.raises(SystemExit) as info:
        eval_main(["report", str(out)])
    assert info.value.code == 0 and "AUC@128k" in capsys.readouterr().out


def _page_samples(path: Path) -> list[dict]:
    import re

    match = re.search(r'<script type="application/json" id="samples-data">(.*?)</script>', path.read_text(), re.S)
    assert match is not None
    return json.loads(match.group(1))


def test_the_html_view_and_compare_html_read_inspect_logs(mrcr_data, tmp_path, capsys):
    """`mrcr-eval view LOG` shows each sample with its conversation read again from the data file
    (the log names it), whatever name Inspect gave the task; `compare --html` takes a log beside a
    run directory."""
    from mrcr_gen.cli import eval_main

    files = sorted(mrcr_data.glob("*.parquet"))
    [log] = inspect_eval(mrcr(data=[str(p) for p in files], limit=5), model="mockllm/model",
                         log_dir=str(tmp_path / "logs"), display="none")
    assert log.eval.metadata["mrcr_gen_recipe"] == "openai-mrcr"
    records, _ = read_inspect_log(log.location)
    with pytest.raises(SystemExit) as info:
        eval_main(["view", log.location])
    assert info.value.code == 0
    page = Path(log.location).with_suffix(".html")
    assert capsys.readouterr().out.strip() == str(page)
    samples = _page_samples(page)
    assert sorted((s["file"], s["row"]) for s in samples) == sorted((r["file"], r["row"]) for r in records)
    assert all(s["expected"] and s["query"] and s["reply"] is not None for s in samples)
    assert {s["score"] for s in samples} == {r["score"] for r in records}
    _mrcr_eval(files, tmp_path / "run", "first_needle", limit=5)
    with pytest.raises(SystemExit) as info:
        eval_main(["compare", str(tmp_path / "run"), log.location, "--html", str(tmp_path / "both.html")])
    assert info.value.code == 0
    page = (tmp_path / "both.html").read_text()
    assert "test-model" in page and "mockllm/model" in page


def test_report_refuses_a_log_of_another_task(tmp_path, capsys):
    from inspect_ai import Task
    from inspect_ai.dataset import Sample

    from mrcr_gen.cli import eval_main

    [log] = inspect_eval(Task(dataset=[Sample(input="hi", target="x")], name="other"), model="mockllm/model",
                         log_dir=str(tmp_path), display="none")
    with pytest.raises(SystemExit) as info:
        eval_main(["report", log.location])
    assert info.value.code == 2
    assert "a log of the task other, not of mrcr_gen/mrcr or mrcr_gen/mrcr_v2" in capsys.readouterr().err


# ------------------------------------------------------------------ inspect view, in a real browser


def test_inspect_view_shows_an_exported_run(mrcr_data, tmp_path, inspect_env):
    """`inspect view` (Inspect's own viewer, a local web server) lists the exported log and shows
    its metrics and every sample, by its id (FILE:ROW), in headless Chromium."""
    import socket
    import time
    import urllib.request

    files = sorted(mrcr_data.glob("*.parquet"))
    _mrcr_eval(files, tmp_path / "run", "first_needle", limit=4)
    logs = tmp_path / "logs"
    export_run(tmp_path / "run", logs / "run.eval")
    ids = [s.id for s in read_eval_log(str(logs / "run.eval")).samples]  # FILE:ROW
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    script = Path(sys.executable).with_name("inspect")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "inspect_ai._cli.main"]
    viewer = subprocess.Popen(
        [*command, "view", "--log-dir", str(logs), "--host", "127.0.0.1", "--port", str(port)],
        env=inspect_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/logs", timeout=5) as answer:
                    listed = json.loads(answer.read())
                break
            except OSError:
                assert viewer.poll() is None and time.monotonic() < deadline, "inspect view did not start"
                time.sleep(0.5)
        assert [Path(f["name"]).name for f in listed["files"]] == ["run.eval"]
        # Here, not as the module's fixture: playwright's event loop would stay for later tests' asyncio.run.
        with open_browser(tmp_path / "chromium-profile") as browser:
            page = browser.new_page()
            page.goto(f"http://127.0.0.1:{port}/", wait_until="networkidle")
            page.wait_for_selector(f"text={ids[0]}", timeout=60_000)
            text = page.inner_text("body")
        assert "mrcr_gen/mrcr" in text and "openai/test-model" in text
        assert len(ids) == 4 and all(sample_id in text for sample_id in ids)
    finally:
        viewer.kill()
        viewer.wait()
