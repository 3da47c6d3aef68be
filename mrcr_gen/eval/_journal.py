"""RUN_DIR/replies.jsonl: each reply as it arrives, before it is graded.

A reply's slot is given to the next request as soon as the reply is in, and its grading (the
reference floors above all: pure-Python `SequenceMatcher`, about 75 ms for a row of the 8k bin)
goes on beside the requests. A run killed meanwhile must not lose the replies it has paid for:
each is appended here first (flushed, so it survives the process; a torn last line is ignored),
and the next run of the command grades it without sending the row again (`pending_replies`).
The file is rewritten without the replies that have their record in results.jsonl when a run
ends, and removed when none is left.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .._files import atomic_path
from .._openai import ChatResult
from ._results import STATUS_OK, ends_with_newline

JOURNAL_NAME = "replies.jsonl"


class ReplyJournal:
    """Appends replies to RUN_DIR/replies.jsonl; `close` keeps only those still without a record.

    `records` are results.jsonl's: a reply that already has its record there (a run killed between
    the record and `close`) is not pending."""

    def __init__(self, out: Path, records: list[dict[str, Any]]):
        self.path = out / JOURNAL_NAME
        graded = {
            _identity(record): record.get("response")
            for record in records
            if isinstance(record.get("row"), int) and record.get("status") == STATUS_OK
        }
        self._recorded = {
            identity
            for identity, text in ((_identity(entry), entry["reply"].get("text")) for entry in read_journal(self.path))
            if identity in graded and graded[identity] == text
        }
        needs_newline = self.path.exists() and self.path.stat().st_size > 0 and not ends_with_newline(self.path)
        self._handle = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        if needs_newline:
            self._handle.write("\n")

    def pending(self) -> dict[tuple[str, int], dict[str, Any]]:
        """The replies of earlier runs still without a record, the latest per (file, row)."""
        return {
            (entry["file"], entry["row"]): entry
            for entry in read_journal(self.path)
            if _identity(entry) not in self._recorded
        }

    def write(self, key: dict[str, Any], result: ChatResult) -> None:
        """Store `result` for the row `key` names (file, row, digest, settings)."""
        entry = key | {"reply": result.model_dump(mode="json")}
        line = json.dumps(entry, ensure_ascii=True)  # ASCII: a lone surrogate in a reply stays storable
        self._handle.write(line + "\n")
        self._handle.flush()

    def recorded(self, key: dict[str, Any]) -> None:
        """The row's reply now has its record in results.jsonl: the journal needs it no more."""
        self._recorded.add(_identity(key))

    def close(self) -> None:
        """Close the file, then rewrite it with the replies still waiting for a record (or remove it)."""
        self._handle.close()
        left = [entry for entry in read_journal(self.path) if _identity(entry) not in self._recorded]
        if not left:
            self.path.unlink(missing_ok=True)
            return
        with atomic_path(self.path) as tmp, open(tmp, "w", encoding="utf-8") as handle:
            handle.writelines(json.dumps(entry, ensure_ascii=True) + "\n" for entry in left)


def read_journal(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The well-formed entries, in file order (a torn or corrupt line is skipped)."""
    path = Path(path)
    if not path.exists():
        return []
    entries = []
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            try:
                entry = json.loads(line)
                ChatResult.model_validate(entry["reply"])
            except (ValueError, KeyError, TypeError):
                continue
            if isinstance(entry.get("file"), str) and isinstance(entry.get("row"), int):
                entries.append(entry)
    return entries


def _identity(entry: dict[str, Any]) -> tuple[Any, ...]:
    return (entry.get("file"), entry.get("row"), entry.get("digest"), json.dumps(entry.get("settings"), sort_keys=True))


def reply_of(entry: dict[str, Any]) -> ChatResult:
    return ChatResult.model_validate(entry["reply"])
