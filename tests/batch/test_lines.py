"""Issue 34 items 3, 6, 7, 10 and the foreign-id rule of issue 37: the one batch output reader
(`mrcr_gen.batch.read_output`) and `BatchFolder.ended`, on hand-written OpenAI / vLLM lines."""

from __future__ import annotations

import json

import pytest

from mrcr_gen.batch import BATCH_FAILED, BatchError, BatchFolder, BatchLimits, read_output, same_model


def reply(custom_id: str, text: str, model: str = "m", n: int = 0) -> dict:
    body = {
        "id": f"chatcmpl-{n}",
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 2},
    }
    return {
        "id": f"batch_req_{n}",
        "custom_id": custom_id,
        "response": {"status_code": 200, "body": body},
        "error": None,
    }


def write(path, lines: list) -> None:
    path.write_text("".join(line if isinstance(line, str) else json.dumps(line) + "\n" for line in lines))


def test_a_torn_line_is_reported_and_the_other_replies_are_read(tmp_path):
    path = tmp_path / "out.jsonl"
    write(path, [reply("a", "A"), '{"custom_id": "b", "resp\n', "not json at all\n", reply("c", "C")])
    read = read_output(path)
    assert sorted(read.outcomes) == ["a", "c"] and all(o.ok for o in read.outcomes.values())
    assert read.torn == [f"{path}:2", f"{path}:3"]
    assert len(read.problems()) == 2 and "torn" in read.problems()[0]


@pytest.mark.parametrize("order", [(0, 1), (1, 0)])
def test_conflicting_replies_are_reported_and_resolved_by_content_not_line_order(tmp_path, order):
    lines = [reply("a", "first answer", n=1), reply("a", "second answer", n=2)]
    path = tmp_path / "out.jsonl"
    write(path, [lines[i] for i in order])
    read = read_output(path)
    assert read.conflicts == ["a"] and "differ" in read.problems()[0]
    kept = read.outcomes["a"].body["choices"][0]["message"]["content"]
    assert kept == "first answer"  # the same whichever line comes first


def test_a_repeated_reply_is_one_reply(tmp_path):
    path = tmp_path / "out.jsonl"
    write(path, [reply("a", "same", n=1), reply("a", "same", n=2)])
    read = read_output(path)
    assert read.conflicts == [] and read.duplicates == 1 and len(read.outcomes) == 1


def test_a_reply_wins_over_an_error_in_either_order(tmp_path):
    error = {"custom_id": "a", "response": {"status_code": 500, "body": {"error": {"message": "x"}}}, "error": None}
    for lines in ([error, reply("a", "A")], [reply("a", "A"), error]):
        write(tmp_path / "o.jsonl", lines)
        assert read_output(tmp_path / "o.jsonl").outcomes["a"].ok


def test_a_request_file_is_refused(tmp_path):
    path = tmp_path / "requests.jsonl"
    write(path, [{"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": {"model": "m"}}])
    with pytest.raises(BatchError, match="is a batch request file"):
        read_output(path)


def test_dated_snapshots_are_the_same_model():
    assert same_model("gpt-4.1-mini-2025-04-14", "gpt-4.1-mini") and same_model("gpt-4-0613", "gpt-4")
    assert same_model("m", "m")
    assert not same_model("gpt-4.1-mini", "gpt-4.1") and not same_model("gpt-4.1-mini-2025-04-14x", "gpt-4.1-mini")
    assert not same_model("gpt-4.1", "gpt-4.1-mini")


def test_ended_batch_with_a_torn_line_gives_the_other_replies_and_an_error_for_the_torn_one(tmp_path):
    batches = BatchFolder(tmp_path, BatchLimits())
    writer = batches.writer()
    for custom_id in ("a", "b", "c"):
        assert writer.add(custom_id, json.dumps({"custom_id": custom_id}).encode() + b"\n")
    (part,) = writer.close()
    write(tmp_path / "part-0001.output.jsonl", [reply("a", "A"), '{"custom_id": "b", "respo\n', reply("zz", "foreign")])
    part.batch_id, part.status, part.output, part.done = "batch_1", "completed", "part-0001.output.jsonl", True
    batches.save()
    rerun = BatchFolder(tmp_path)  # as a rerun reads the record
    ended = rerun.ended()
    assert ended.outcomes["a"].ok and not ended.outcomes["b"].ok and not ended.outcomes["c"].ok
    assert ended.outcomes["b"].code == BATCH_FAILED and "not readable" in (ended.outcomes["b"].error or "")
    assert "zz" not in ended.outcomes
    assert any("torn" in p for p in ended.problems) and any("zz" in p and "never had" in p for p in ended.problems)
    rerun.mark_recorded(ended.parts)
    assert BatchFolder(tmp_path).ended().outcomes == {}


def test_an_unreadable_record_is_refused(tmp_path):
    (tmp_path / "batches.json").write_text("{not json")
    with pytest.raises(BatchError, match=r"batches\.json is not a batch record"):
        BatchFolder(tmp_path)


def test_many_torn_lines_are_named_up_to_a_few(tmp_path):
    path = tmp_path / "out.jsonl"
    write(path, [reply("a", "A")] + ["torn\n"] * 25)
    problems = read_output(path).problems()
    assert len(problems) == 11 and problems[-1] == "... and 15 more lines that are not batch output lines"
