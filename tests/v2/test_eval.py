"""generate -> validate -> eval round trip of MRCR v2 against the local chat server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mrcr_gen import EvalConfig, run_eval
from mrcr_gen.recipes.mrcr_v2 import (
    grade_v2,
    iter_records,
    read_v2_items,
    transcript_id,
    v2_report,
    validate_v2_paths,
)
from tests.support.chat_server import ChatServer
from tests.support.v2_resolve import solve


def _records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line.strip()]


@pytest.fixture()
def files(v2_data) -> list[Path]:
    found = sorted(v2_data.rglob("*.csv"))
    report = validate_v2_paths(found).report
    assert report.findings == [] and report.summary.rows == 24
    return found


def test_items_send_the_whole_queries_string_grouped_by_transcript(v2_csv):
    items = list(read_v2_items(v2_csv))
    records = list(iter_records(v2_csv))
    assert [i.messages for i in items] == [[{"role": "user", "content": r["queries"]}] for r in records]
    assert [i.group for i in items] == [transcript_id(r["queries"][: -len(r["view_ops"])]) for r in records]
    assert [i.prompt_tokens for i in items] == [int(r["context_len"]) for r in records]
    assert {i.recipe for i in items} == {"mrcr-v2"} and all(i.prefix == r["answer"][:12] for i, r in zip(items, records))


def test_oracle_scores_one_and_rows_of_a_transcript_go_together(files, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-v2")
    with ChatServer("oracle") as server:
        _, summary = run_eval(EvalConfig(data=[str(f) for f in files], model="m", out=str(tmp_path / "run"),
                                         base_url=server.base_url, concurrency=1))
        sent = [r["messages"] for r in server.requests]
    assert summary["mean_score"] == 1.0
    assert all(len(m) == 1 and m[0]["role"] == "user" for m in sent)
    groups = [transcript_id(m[0]["content"][: m[0]["content"].rfind("User: Prepend ")]) for m in sent]
    runs = [g for i, g in enumerate(groups) if i == 0 or groups[i - 1] != g]
    assert len(runs) == len(set(groups))  # each transcript's rows were sent one after another
    report = summary["mrcr_v2"]
    by_n = {entry["n_needles"]: entry for entry in report["by_needles"]}
    assert by_n[4]["up_to_128k"] == 1.0 and by_n[4]["up_to_128k_count"] == 12 and by_n[4]["at_1m"] is None


def test_first_needle_scores_equal_the_grader_on_that_choice(files, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-v2")
    with ChatServer("first_needle") as server:
        run_eval(EvalConfig(data=[str(f) for f in files], model="m", out=str(tmp_path / "run"), base_url=server.base_url))
    records = _records(tmp_path / "run")
    assert len(records) == 24
    rows = {(str(Path(f).resolve()), i): r for f in files for i, r in enumerate(iter_records(f))}
    scores = []
    for record in records:
        row = rows[(str(Path(record["file"]).resolve()), record["row"])]
        solved = solve(row["queries"])
        assert record["score"] == grade_v2(solved.hash + solved.writings[0], row["answer"])
        scores.append(record["score"])
    assert 0 < min(scores) and max(scores) == 1.0 and sum(scores) / len(scores) < 1.0  # first ordinals score 1
    report = v2_report(records)
    assert {e["n_needles"] for e in report["by_needles"]} == {2, 4}


def test_rows_over_the_window_count_zero_in_up_to_128k_but_are_not_scored(files, tmp_path, monkeypatch):
    """Issue 19 item 3: a window inside the (8192, 16384] bucket; an always-right model."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-v2")
    tokens = sorted(item.prompt_tokens for f in files for item in read_v2_items(f) if item.bin_upper == 16384)
    window = tokens[len(tokens) // 2]
    with ChatServer("oracle") as server:
        _, summary = run_eval(EvalConfig(data=[str(f) for f in files], model="m", out=str(tmp_path / "run"),
                                         base_url=server.base_url, max_context_window=window))
    records = _records(tmp_path / "run")
    skipped = [r for r in records if r["status"] == "skipped"]
    assert 0 < len(skipped) < len(tokens) and all(r["o200k_prompt_tokens"] > window for r in skipped)
    assert summary["mean_score"] == 1.0  # the official loop's rule: skipped rows are not scored
    for entry in summary["mrcr_v2"]["by_needles"]:
        mine = [r for r in records if r["n_needles"] == entry["n_needles"]]
        not_sent = sum(1 for r in mine if r["status"] == "skipped")
        assert entry["up_to_128k"] == pytest.approx((len(mine) - not_sent) / len(mine))
        assert entry["up_to_128k_count"] == len(mine)
        assert entry["mean_score"] == 1.0 and entry["count"] == len(mine) - not_sent and entry["skipped"] == not_sent
        (bucket,) = [b for b in entry["buckets"] if b["bucket_upper"] == 16384]
        assert bucket["mean_score"] == pytest.approx(1 - bucket["skipped"] / bucket["count"])


def test_a_row_that_cannot_be_sent_counts_zero_in_its_bucket(v2_csv, tmp_path, monkeypatch):
    """Issue 19 item 3: an error row (its view_ops broken) stays in "up to 128K", as in mean_score."""
    import csv

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-v2")
    rows = list(iter_records(v2_csv))
    rows[1]["view_ops"] = "not the tail"
    data = tmp_path / "broken.csv"
    with open(data, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    with ChatServer("oracle") as server:
        config = EvalConfig(data=[str(data)], model="m", out=str(tmp_path / "run"), base_url=server.base_url)
        _, summary = run_eval(config)
    expected = (len(rows) - 1) / len(rows)
    assert summary["mean_score"] == pytest.approx(expected) and summary["errors"]["by_check"] == {"view_ops": 1}
    (entry,) = summary["mrcr_v2"]["by_needles"]
    assert entry["up_to_128k"] == pytest.approx(expected) and entry["up_to_128k_count"] == len(rows)
    assert [b["bin"] for b in summary["bins"]] == ["(8192, 16384]"]


def test_compare_of_an_openai_run_and_a_v2_run_keeps_their_8k_bins_apart(files, tmp_path, capsys, monkeypatch):
    """Issue 19 item 7: openai/mrcr's [4096, 8192] and v2's (4096, 8192] are different bins."""
    from mrcr_gen import write_rows
    from mrcr_gen.cli._eval import eval_main
    from tests.eval.conftest import generated_rows
    from tests.eval.test_eval_cli import call

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-v2")
    openai_data = tmp_path / "openai.parquet"
    write_rows(generated_rows([(2, 11), (2, 12)]), openai_data)
    with ChatServer("oracle") as server:
        for data, out in (([str(openai_data)], "openai"), ([str(f) for f in files], "v2")):
            run_eval(EvalConfig(data=data, model="m", out=str(tmp_path / out), base_url=server.base_url))
    code, out, _ = call(eval_main, ["compare", str(tmp_path / "openai"), str(tmp_path / "v2")], capsys)
    header = next(line for line in out.splitlines() if "AUC@128k" in line)
    assert code == 0 and "[4k, 8k]" in header and "(4k, 8k]" in header and "16k" in header and " 8k " not in header


def test_bin_takes_every_v2_bucket(files, tmp_path, capsys, monkeypatch):
    """Issue 19 item 7: v2 buckets reach 8388608; --bin refuses only edges no recipe has."""
    from mrcr_gen.cli._eval import eval_main
    from tests.eval.test_eval_cli import call

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-v2")
    with ChatServer("oracle") as server:
        args = [str(f) for f in files] + ["--model", "m", "--base-url", server.base_url, "-q"]
        two_bins = ["--bin", "2097152", "--bin", "16384"]
        code, _, err = call(eval_main, [*args, "--out", str(tmp_path / "a"), *two_bins], capsys)
        assert code == 0, err
        assert {r["bin"] for r in _records(tmp_path / "a")} == {"(8192, 16384]"}
        code, _, err = call(eval_main, [*args, "--out", str(tmp_path / "b"), "--bin", "8388608"], capsys)
        assert code == 0 and _records(tmp_path / "b") == [] and server.total_requests == 12
        code, _, err = call(eval_main, [*args, "--out", str(tmp_path / "c"), "--bin", "16777216"], capsys)
        assert code == 2 and "no bin has upper edge 16777216" in err and "8388608" in err
