"""`GroundTruth`: rows checked against what their own prompt determines, and fixed where allowed."""

from __future__ import annotations

import json
import pickle
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from mrcr_gen.validate import CheckContext, GroundTruth


def truth(record: dict[str, Any]) -> tuple[list[dict], dict[str, Any]]:
    """A toy prompt: its messages, and the answer is the first writing, the count the number of messages."""
    messages = json.loads(record["prompt"])
    if not messages:
        raise ValueError("no messages")
    return messages, {"answer": messages[0]["content"], "count": len(messages)}


GROUND = GroundTruth(truth, checks={"answer": "answer", "count": "count"}, unreadable="prompt", fixable=frozenset({"answer"}))
CONTEXT = CheckContext(file="f.parquet", count_tokens=False, tokenizer="o200k_base")


def _row(texts: list[str], **changes: Any) -> dict[str, Any]:
    messages = [{"role": "assistant", "content": t} for t in texts]
    return {"prompt": json.dumps(messages), "answer": texts[0], "count": len(texts)} | changes


def _checks(record: dict[str, Any], context: CheckContext = CONTEXT) -> list[str]:
    return [f.check for f in GROUND.checker(context).check(record, 0).findings]


@given(texts=st.lists(st.text(min_size=1, max_size=20), min_size=1, max_size=5), other=st.text(max_size=20))
def test_a_row_agrees_exactly_when_its_columns_are_its_prompts(texts: list[str], other: str) -> None:
    assert _checks(_row(texts)) == []
    assert _checks(_row(texts, answer=other)) == ([] if other == texts[0] else ["answer"])
    broken = _row(texts, answer=other)
    fixed = GROUND.fix(broken)
    assert fixed is not None and fixed[0] == _row(texts)
    assert fixed[1] == ([] if other == texts[0] else ["answer rebuilt from the prompt"])


def test_a_column_fix_may_not_rebuild_refuses_the_fix_and_an_unreadable_prompt_is_one_finding() -> None:
    assert _checks(_row(["a", "b"], count=5)) == ["count"]
    assert GROUND.fix(_row(["a", "b"], count=5, answer="x")) is None
    assert _checks({"prompt": "[]", "answer": "x", "count": 0}) == ["prompt"]
    assert _checks({"prompt": 3, "answer": "x"}) == []  # not text: the schema findings say why
    assert GROUND.fix({"prompt": "[]", "answer": "x"}) is None


def test_the_token_bin_is_recounted_and_the_declaration_pickles() -> None:
    counted = CheckContext(file="f.parquet", count_tokens=True, tokenizer="o200k_base")
    result = GROUND.checker(counted).check(_row(["a short writing"]), 0)
    assert result.n_tokens is not None and result.bin == "out of range"
    assert [f.check for f in result.findings] == ["token_bin"]
    assert pickle.loads(pickle.dumps(GROUND)).checker(CONTEXT).check(_row(["a"]), 0).findings == ()
