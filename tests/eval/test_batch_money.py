"""Issue 34 items 2, 3, 6, 7 and 10 through `mrcr-eval batch import` and `--batch`: torn,
conflicting and dated-model lines, request files and foreign ids, and rows of identical content
costed once."""

from __future__ import annotations

import asyncio
import json
import shutil

from mrcr_gen import write_report
from mrcr_gen.cli import eval_main
from mrcr_gen.eval import EvalConfig, run_batch_async
from mrcr_gen.recipes import RECIPES
from tests.support.chat_server import ChatServer

from .conftest import API_KEY
from .test_eval_batch import FAST, vllm_line
from .test_eval_cli import call

MODEL = ["--model", "gpt-4.1-mini"]


def exported(data, tmp_path, capsys, *extra: str) -> list[dict]:
    requests = tmp_path / "requests.jsonl"
    assert call(eval_main, ["batch", "export", *map(str, data), "-o", str(requests), *MODEL, *extra], capsys)[0] == 0
    return [json.loads(line) for line in requests.read_text().splitlines()]


def answered(lines: list[dict], model: str = "gpt-4.1-mini") -> list[dict]:
    out = [vllm_line(line, n) for n, line in enumerate(lines)]
    for line in out:
        line["response"]["body"]["model"] = model
    return out


def imported(results, data, out, capsys, *extra: str) -> tuple[int, str]:
    code, _, err = call(
        eval_main, ["batch", "import", str(results), *map(str, data), *MODEL, "--out", str(out), "-q", *extra], capsys
    )
    return code, err


def dump(path, lines: list) -> None:
    path.write_text("".join(line if isinstance(line, str) else json.dumps(line) + "\n" for line in lines))


def test_a_torn_line_does_not_block_the_paid_replies(small_data, tmp_path, capsys):
    lines = answered(exported([small_data], tmp_path, capsys))
    text = [json.dumps(line) + "\n" for line in lines]
    text[3] = text[3][: len(text[3]) // 2] + "\n"  # cut off mid-line
    results = tmp_path / "results.jsonl"
    results.write_text("".join(text))
    code, err = imported(results, [small_data], tmp_path / "run", capsys)
    assert code == 1, err  # one row to resend, not a refusal
    assert "results.jsonl:4: not a batch output line" in err
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["n_scored"] == 11 and summary["errors"]["by_check"] == {"not_in_results": 1}


def test_conflicting_replies_give_the_same_score_in_any_line_order(small_data, tmp_path, capsys):
    lines = answered(exported([small_data], tmp_path, capsys))
    wrong = json.loads(json.dumps(lines[0]))
    wrong["response"]["body"]["choices"][0]["message"]["content"] = "zzz not the answer"
    scores = []
    for name, order in (("a", [*lines, wrong]), ("b", [wrong, *lines])):
        dump(tmp_path / f"{name}.jsonl", order)
        code, err = imported(tmp_path / f"{name}.jsonl", [small_data], tmp_path / f"run-{name}", capsys)
        assert code == 0, err
        assert f"{lines[0]['custom_id']}: replies that differ" in err
        scores.append(json.loads((tmp_path / f"run-{name}" / "summary.json").read_text())["mean_score"])
    assert scores[0] == scores[1]


def test_replies_of_the_dated_snapshot_are_accepted(small_data, tmp_path, capsys):
    lines = answered(exported([small_data], tmp_path, capsys), model="gpt-4.1-mini-2025-04-14")
    dump(tmp_path / "results.jsonl", lines)
    code, err = imported(tmp_path / "results.jsonl", [small_data], tmp_path / "run", capsys)
    assert code == 0, err


def test_the_request_file_is_refused_with_one_line_and_nothing_written(small_data, tmp_path, capsys):
    exported([small_data], tmp_path, capsys)
    code, err = imported(tmp_path / "requests.jsonl", [small_data], tmp_path / "run", capsys)
    assert code == 2 and err.strip().count("\n") == 0 and "is a batch request file" in err
    assert not (tmp_path / "run").exists()


def test_custom_ids_no_row_has_are_refused_but_a_narrower_selection_is_not(small_data, tmp_path, capsys):
    lines = answered(exported([small_data], tmp_path, capsys))
    foreign = json.loads(json.dumps(lines[0]))
    foreign["custom_id"] = "f" * 64
    dump(tmp_path / "foreign.jsonl", [*lines, foreign])
    code, err = imported(tmp_path / "foreign.jsonl", [small_data], tmp_path / "run", capsys)
    assert code == 2 and err.strip().count("\n") == 0 and "which no row of the data files has" in err
    assert not (tmp_path / "run").exists()
    dump(tmp_path / "all.jsonl", lines)  # every row answered, two needles selected: the rest unused
    code, err = imported(tmp_path / "all.jsonl", [small_data], tmp_path / "narrow", capsys, "--needles", "2")
    assert code == 0, err


def test_rows_of_identical_content_are_costed_once_on_import(small_data, tmp_path, capsys):
    twin = tmp_path / "twin.parquet"
    shutil.copy(small_data, twin)
    lines = answered(exported([small_data, twin], tmp_path, capsys))
    assert len(lines) == 12  # one request per distinct content
    dump(tmp_path / "results.jsonl", lines)
    code, err = imported(
        tmp_path / "results.jsonl", [small_data, twin], tmp_path / "run", capsys, "--price-in", "1", "--price-out", "4"
    )
    assert code == 0, err
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    billed = sum(line["response"]["body"]["usage"]["prompt_tokens"] for line in lines)
    assert summary["n_scored"] == 24 and summary["usage"]["prompt_tokens"] == billed


def test_rows_of_identical_content_are_costed_once_through_the_batch_api(small_data, tmp_path, api_key):
    twin = tmp_path / "twin.parquet"
    shutil.copy(small_data, twin)
    with ChatServer("oracle") as server:
        config = EvalConfig(data=[str(small_data), str(twin)], model="test-model", out=str(tmp_path / "run"),
                            base_url=server.base_url, price_in=1.0, price_out=4.0)  # fmt: skip
        asyncio.run(run_batch_async(config, recipes=RECIPES, api_key=API_KEY, limits=FAST))
        billed = sum(
            json.loads(line)["response"]["body"]["usage"]["prompt_tokens"]
            for f in server.files.values()
            if f["object"]["purpose"] == "batch_output"
            for line in f["content"].decode().splitlines()
        )
    summary = write_report(tmp_path / "run")
    assert summary["n_scored"] == 24 and billed > 0 and summary["usage"]["prompt_tokens"] == billed


def test_a_file_of_no_output_line_is_refused_with_one_line(small_data, tmp_path, capsys):
    (tmp_path / "notes.jsonl").write_text("hello\nworld\n")
    code, err = imported(tmp_path / "notes.jsonl", [small_data], tmp_path / "run", capsys)
    assert code == 2 and err.strip().count("\n") == 0 and "notes.jsonl:1: not a batch output line" in err
    assert not (tmp_path / "run").exists()
