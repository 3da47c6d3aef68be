"""mrcr-json's checking declaration (`SPEC`): its rows checked one by one (the final query, the
needle count, the answer: the writing asked for, the token bin) and fixed (the ground truth rebuilt
from the prompt)."""

from __future__ import annotations

import json
from typing import Any

from mrcr_gen._bins import bin_for_tokens
from mrcr_gen._tokens import count_tokens_batch
from mrcr_gen.validate import CheckContext, CheckSpec, Finding, ParquetRows, RowResult

from ._answers import Row, parse
from ._rows import SCHEMA


def truth(record: dict[str, Any]) -> tuple[Row, dict[str, Any]]:
    """The row's conversation and the columns it determines; ValueError (one line) when it cannot tell them."""
    row = parse(json.loads(record["prompt"]))
    if not 1 <= row.k <= len(row.needles):
        raise ValueError(f"the query asks for needle {row.k} of {len(row.needles)}")
    return row, {"answer": row.messages[row.needles[row.k - 1]]["content"], "n_needles": len(row.needles)}


class Checks:
    """Every row on its own (no state across rows)."""

    def __init__(self, context: CheckContext) -> None:
        self.context = context

    def check(self, record: dict[str, Any], row: int) -> RowResult:
        if any(not isinstance(record.get(c), str) for c in ("prompt", "answer", "random_string_to_prepend")):
            return RowResult(row=row)  # the schema findings say why
        try:
            parsed, expected = truth(record)
        except (ValueError, TypeError, RecursionError) as exc:
            return RowResult(row=row, findings=(self.error(row, "final_query", str(exc).splitlines()[0]),))
        errors, n_tokens, label = [], None, None
        if parsed.prefix != record["random_string_to_prepend"]:
            errors.append(("final_query", f"the query's prefix {parsed.prefix!r} is not the row's random string"))
        if record.get("n_needles") != expected["n_needles"]:
            errors.append(
                ("needle_count", f"n_needles {record.get('n_needles')}, the prompt has {len(parsed.needles)}")
            )
        if record["answer"] != expected["answer"]:
            errors.append(
                ("answer", f"answer is not the writing of needle {parsed.k} ({parsed.needles[parsed.k - 1]})")
            )
        if self.context.count_tokens:
            texts = [m["content"] for m in parsed.messages] + [record["answer"]]
            n_tokens = sum(count_tokens_batch(texts, tokenizer=self.context.tokenizer))
            label = getattr(bin_for_tokens(n_tokens), "label", "out of range")
            if label == "out of range":
                errors.append(("token_bin", f"{n_tokens} tokens (prompt + answer) lie outside every bin"))
        findings = tuple(self.error(row, check, message) for check, message in errors)
        return RowResult(row=row, findings=findings, n_tokens=n_tokens, bin=label, n_needles=len(parsed.needles))

    def error(self, row: int, check: str, message: str) -> Finding:
        return Finding(file=self.context.file, row=row, check=check, severity="error", message=message)

    def finish(self) -> list[Finding]:
        return []


def fix_record(record: dict[str, Any], *, file: str = "", row: int = 0) -> tuple[dict, list[str]] | None:
    """The row with its ground truth rebuilt from the prompt; None when the query's prefix disagrees."""
    try:
        parsed, expected = truth(record)
    except (ValueError, TypeError, KeyError, RecursionError):
        return None
    if parsed.prefix != record.get("random_string_to_prepend"):
        return None
    return record | expected, [f"{key} rebuilt from the prompt" for key in expected if record.get(key) != expected[key]]


CHECKS = ("file", "schema", "final_query", "needle_count", "answer", "token_bin")
SPEC = CheckSpec(ParquetRows(SCHEMA, frozenset({"n_needles"})), Checks, CHECKS, fix_record=fix_record)
