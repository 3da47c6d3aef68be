"""Duplicate rows and prompts: a row equal to an earlier row of its file (`duplicate_row`, an error),
and a prompt sent by an earlier row (`duplicate_prompt`: an error in the same file, a warning in
another file checked with it, which may be a copy of the set in another folder): either counts one
test twice. Rows are compared by digests the check workers compute (`row_digests`); the digests
seen stay in the validating process, 32 bytes a row."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ._findings import Finding, RowResult, Severity


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def row_digests(record: dict[str, Any], prompt_column: str) -> tuple[str, str | None]:
    """(the digest of the whole row, the digest of its prompt column, None when it holds no text).
    The whole row's covers the prompt by its digest: its text (megabytes in a long row) is hashed
    once, never JSON-escaped."""
    prompt = record.get(prompt_column)
    if not isinstance(prompt, str):
        return _digest(json.dumps(record, sort_keys=True, default=repr)), None
    prompt_digest = _digest(prompt)
    rest = {key: value for key, value in record.items() if key != prompt_column}
    return _digest(prompt_digest + json.dumps(rest, sort_keys=True, default=repr)), prompt_digest


class Duplicates:
    """The rows seen so far: each file's row digests, every file's prompt digests."""

    def __init__(self) -> None:
        self.prompts: dict[str, tuple[str, int]] = {}
        self.rows: dict[str, int] = {}
        self.file: str | None = None

    def check(self, result: RowResult, file: str) -> RowResult:
        """`result` plus its duplicate findings (its digests are dropped: they are no longer needed)."""
        if result.digest is None:
            return result
        if file != self.file:
            self.file, self.rows = file, {}
        found: list[Finding] = []
        first = self.rows.setdefault(result.digest, result.row)
        if first != result.row:
            message = f"the row equals row {first} of this file: one test counted twice"
            found.append(Finding(file=file, row=result.row, check="duplicate_row", severity="error", message=message))
        elif result.prompt_digest is not None:
            where = self.prompts.setdefault(result.prompt_digest, (file, result.row))
            if where != (file, result.row):
                same = where[0] == file
                place = f"row {where[1]} of this file" if same else f"row {where[1]} of {where[0]}"
                message = f"the prompt is the prompt of {place}: one test counted twice"
                severity: Severity = "error" if same else "warning"  # another folder may hold a copy of the set
                found.append(
                    Finding(file=file, row=result.row, check="duplicate_prompt", severity=severity, message=message)
                )
        update: dict[str, Any] = {"digest": None, "prompt_digest": None}
        if found:
            update["findings"] = (*result.findings, *found)
        return result.model_copy(update=update)
