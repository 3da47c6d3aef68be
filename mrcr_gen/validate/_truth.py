"""Checks of rows whose ground truth follows from their own prompt: a recipe gives `truth(record)`
(the messages sent and the columns they determine), and every row is checked on its own against it,
with its token bin recounted; `--fix` rewrites the columns that may be rebuilt. This is the work
such a recipe would otherwise write again: it declares only how its prompt is read."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .._bins import bin_for_tokens
from .._tokens import count_tokens_batch
from ._findings import OUT_OF_RANGE, Finding, RowResult
from ._spec import CheckContext

#: record -> (the messages the prompt sends, {column: the value the prompt determines});
#: ValueError (one line) when the prompt cannot be read.
Truth = Callable[[dict[str, Any]], tuple[list[dict], dict[str, Any]]]


@dataclass(frozen=True)
class GroundTruth:
    """A recipe's ground truth: `truth`, the check that names each column's disagreement, the check
    of an unreadable prompt, and the columns `--fix` may rebuild (others must agree for a fix)."""

    truth: Truth
    checks: dict[str, str]  # column -> check name of a disagreement
    unreadable: str = "prompt_json"
    fixable: frozenset[str] = frozenset()
    text_columns: tuple[str, ...] = ("prompt", "answer")  # strings, else the schema findings say why

    def checker(self, context: CheckContext) -> TruthChecker:
        return TruthChecker(self, context)

    def expected(self, record: dict[str, Any]) -> tuple[list[dict], dict[str, Any]]:
        try:
            return self.truth(record)
        except (TypeError, KeyError, RecursionError) as exc:
            raise ValueError(str(exc)) from None

    def fix(self, record: dict[str, Any], *, file: str = "", row: int = 0) -> tuple[dict, list[str]] | None:
        """The row with its fixable columns rebuilt; None when it cannot be read or another column disagrees."""
        try:
            _, expected = self.expected(record)
        except ValueError:
            return None
        wrong = [column for column, value in expected.items() if record.get(column) != value]
        if any(column not in self.fixable for column in wrong):
            return None
        return record | expected, [f"{column} rebuilt from the prompt" for column in wrong]


class TruthChecker:
    """Every row on its own (no state across rows) against its ground truth."""

    def __init__(self, truth: GroundTruth, context: CheckContext) -> None:
        self.truth, self.context = truth, context

    def check(self, record: dict[str, Any], row: int) -> RowResult:
        if any(not isinstance(record.get(column), str) for column in self.truth.text_columns):
            return RowResult(row=row)  # the schema findings say why
        try:
            messages, expected = self.truth.expected(record)
        except ValueError as exc:
            return RowResult(row=row, findings=(self.error(row, self.truth.unreadable, str(exc).splitlines()[0]),))
        findings = [
            self.error(
                row, self.truth.checks[column], f"{column} is {record.get(column)!r:.60}, the prompt says {value!r:.60}"
            )
            for column, value in expected.items()
            if record.get(column) != value
        ]
        n_tokens = label = None
        if self.context.count_tokens:
            texts = [m["content"] for m in messages] + [record["answer"]]
            n_tokens = sum(count_tokens_batch(texts, tokenizer=self.context.tokenizer))
            found = bin_for_tokens(n_tokens)
            label = OUT_OF_RANGE if found is None else found.label
            if found is None:
                findings.append(
                    self.error(row, "token_bin", f"{n_tokens} tokens (prompt + answer) lie outside every bin")
                )
        needles = expected.get("n_needles")  # the summary's rows per bin and needle count
        return RowResult(row=row, findings=tuple(findings), n_tokens=n_tokens, bin=label, n_needles=needles)

    def error(self, row: int, check: str, message: str) -> Finding:
        return Finding(file=self.context.file, row=row, check=check, severity="error", message=message)

    def finish(self) -> list[Finding]:
        return []
