"""Issue 34 items 2, 3, 5, 6, 7, 10 and 11 through `mrcr-eval batch export|import` and `--batch`:
torn, conflicting and dated-model lines, request files and foreign ids, rows of identical content
costed once, OpenAI batch output priced at the batch discount, files that are not MRCR data, and
the selection and pricing options of an online run."""

from __future__ import annotations

import asyncio
import json
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mrcr_gen import iter_rows, write_report
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
        asyncio.run(run_batch_async(config, recipes=RECIPES, api_key=API_KEY, limits=FAST, keep_files=True))
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


def openai_lines(lines: list[dict]) -> list[dict]:
    """The same replies as the OpenAI Batch API writes them: line ids `batch_req_...`, half the
    prompt served from the cache."""
    for n, line in enumerate(lines):
        line["id"] = f"batch_req_{n:024x}"
        line["response"]["request_id"] = f"req_{n}"
        line["response"]["body"]["usage"]["prompt_tokens_details"] = {"cached_tokens": 50}
    return lines


@pytest.mark.parametrize("source", ["openai", "vllm"])
def test_openai_batch_output_is_priced_at_the_batch_discount(source, small_data, tmp_path, capsys):
    """Item 5: replies of the OpenAI Batch API cost half the list price (cached tokens at half the
    cached price); `vllm run-batch` replies are priced as given; --price-cached is honoured."""
    lines = answered(exported([small_data], tmp_path, capsys))
    if source == "openai":
        lines = openai_lines(lines)
    dump(tmp_path / "results.jsonl", lines)
    code, err = imported(tmp_path / "results.jsonl", [small_data], tmp_path / "run", capsys)
    assert code == 0, err
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    usage = summary["usage"]
    uncached = usage["prompt_tokens"] - usage["cached_tokens"]
    half = 0.5 if source == "openai" else 1.0
    list_cost = (uncached * 0.40 + usage["cached_tokens"] * 0.10 + usage["completion_tokens"] * 1.60) / 1e6
    assert summary["cost_usd"] == pytest.approx(list_cost * half, abs=1e-9)
    assert (summary["price_per_1m"].get("batch_discount") == 0.5) == (source == "openai")
    cached = ["--price-in", "1", "--price-out", "2", "--price-cached", "0"]
    code, err = imported(tmp_path / "results.jsonl", [small_data], tmp_path / "priced", capsys, *cached)
    assert code == 0, err
    summary = json.loads((tmp_path / "priced" / "summary.json").read_text())
    assert summary["cost_usd"] == pytest.approx(half * (uncached * 1 + usage["completion_tokens"] * 2) / 1e6, abs=1e-9)


def test_export_of_a_parquet_that_is_not_mrcr_is_one_line_and_writes_nothing(small_data, tmp_path, capsys):
    """Item 10: another parquet, or one of MRCR's columns whose rows cannot be read: one line
    saying why, exit 2, no file (not even an empty one)."""
    other = tmp_path / "other.parquet"
    pq.write_table(pa.table({"a": [1, 2], "b": ["x", "y"]}), other)
    broken = tmp_path / "broken.parquet"
    columns = {"prompt": ["not json", "[]"], "answer": ["x", "y"], "random_string_to_prepend": ["a", "b"]}
    columns |= {"n_needles": [2, 2], "desired_msg_index": [1, 1], "total_messages": [2, 2], "n_chars": [1, 1]}
    pq.write_table(pa.table(columns), broken)
    for data, why in ((other, "not a file of any known recipe"), (broken, "none of the 2 selected rows can be sent")):
        requests = tmp_path / f"{data.stem}.jsonl"
        code, _, err = call(eval_main, ["batch", "export", str(data), "-o", str(requests), *MODEL], capsys)
        assert code == 2 and err.strip().count("\n") == 0 and why in err, err
        assert not requests.exists() and not list(tmp_path.glob(f".{data.stem}*"))
    args = ["batch", "export", str(small_data), "-o", str(requests), *MODEL, "-n", "16"]
    code, _, err = call(eval_main, args, capsys)
    assert code == 2 and "no row of the data files is selected" in err and not requests.exists()


def test_export_and_import_take_the_selection_options_of_an_online_run(small_data, tmp_path, capsys, api_key):
    """Item 11: --per-bin, --control, --max-context-window and --tokenizer select and send as
    `mrcr-eval` does; an import with them grades the same rows."""
    with ChatServer("oracle") as server:
        online = tmp_path / "online"
        args = [str(small_data), *MODEL, "--base-url", server.base_url, "-o", str(online), "-q", "--per-bin", "1"]
        assert call(eval_main, [*args, "--control", "query-only"], capsys)[0] in (0, 1)  # 1: the control's finding
        sent = {json.dumps(body["messages"]) for body in server.requests}  # the oracle fails them: retried
    lines = exported([small_data], tmp_path, capsys, "--per-bin", "1", "--control", "query-only")
    assert {json.dumps(line["body"]["messages"]) for line in lines} == sent and len(lines) == 3
    lines = exported([small_data], tmp_path, capsys, "--per-bin", "1")
    dump(tmp_path / "results.jsonl", answered(lines))
    code, err = imported(tmp_path / "results.jsonl", [small_data], tmp_path / "run", capsys, "--per-bin", "1")
    assert code == 0, err
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["n_rows"] == len(lines) == json.loads((online / "summary.json").read_text())["n_rows"] == 3
    counts = sorted(row_tokens(small_data))
    window = ("--max-context-window", str(counts[len(counts) // 2]))
    assert 0 < len(exported([small_data], tmp_path, capsys, *window)) < 12
    code, _, err = call(eval_main, ["batch", "export", str(small_data), "-o", str(tmp_path / "x"), *MODEL, *window,
                                    "--tokenizer", "no-such-encoding"], capsys)  # fmt: skip
    assert code == 2 and err.strip().count("\n") == 0 and "no-such-encoding" in err
    code, _, err = call(eval_main, ["batch", "export", str(small_data), "-o", str(tmp_path / "x"), *MODEL,
                                    "--price-cached", "1"], capsys)  # fmt: skip
    assert code == 2 and "--price-cached" in err  # export prices nothing: refused


def row_tokens(data) -> list[int]:
    import tiktoken

    encoding = tiktoken.get_encoding("o200k_base")
    return [sum(len(encoding.encode(m["content"])) for m in json.loads(row.prompt)) for row in iter_rows(data)]
