"""Rewriting openai/mrcr rows whose ground truth the prompt still determines (`mrcr-validate --fix`)."""

from __future__ import annotations

import re
from typing import Any

from ..._models import ordinal
from ._checks import analyze_row
from ._models import RANDOM_STRING_PATTERN

#: Checks whose errors `--fix` can repair from the prompt alone.
FIXABLE = frozenset({"ground_truth", "desired_index", "answer_prefix", "total_messages", "n_chars"})


_RANDOM_STRING = re.compile(RANDOM_STRING_PATTERN)


def fix_record(record: dict[str, Any], *, file: str = "<row>", row: int = 0) -> tuple[dict[str, Any], list[str]] | None:
    """The row with answer, desired_msg_index and counts rebuilt from the prompt and the query's
    ordinal, or None when that is not unambiguous (needle count off, needle responses that
    coincide, a random string that disagrees, an unparsable prompt or query...)."""
    result, ctx = analyze_row(record, file=file, row=row, count_tokens=False)
    errors = {f.check for f in result.findings if f.is_error}
    if not errors <= FIXABLE:
        return None
    messages, k, needles = ctx.messages, ctx.k, ctx.needles
    rs = record.get("random_string_to_prepend")
    if messages is None or k is None or ctx.ask is None or not isinstance(rs, str):
        return None
    if not _RANDOM_STRING.match(rs) or rs != ctx.random_string:
        return None
    if len(needles) != record.get("n_needles") or not 1 <= k <= len(needles):
        return None
    target = needles[k - 1]
    if target + 1 >= len(messages) - 1 or messages[target + 1]["role"] != "assistant":
        return None
    fixed = dict(record)
    fixed["answer"] = rs + messages[target + 1]["content"]
    fixed["desired_msg_index"] = target
    fixed["total_messages"] = len(messages)
    fixed["n_chars"] = sum(len(m["content"]) for m in messages)
    notes = []
    for column in ("desired_msg_index", "total_messages", "n_chars"):
        if fixed[column] != record.get(column):
            notes.append(f"{column} {record.get(column)} -> {fixed[column]}")
    if fixed["answer"] != record.get("answer"):
        was = next((f.message.split("; ", 1)[-1] for f in result.findings if f.check == "ground_truth"), None)
        reason = was or next((f.message for f in result.findings if f.check == "answer_prefix"), "differed")
        notes.append(
            f"answer <- random string + messages[{target + 1}] (response to the {ordinal(k)} needle); before: {reason}"
        )
    return fixed, notes
