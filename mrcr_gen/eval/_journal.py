"""RUN_DIR/replies.jsonl: each reply as it arrives, before it is graded.

A reply's slot is given to the next request as soon as the reply is in, and its grading (the
reference floors above all: about 10 ms for a row of the 8k bin)
goes on beside the requests. A run killed meanwhile must not lose the replies it has paid for:
each is appended here first (flushed, so it survives the process; a torn last line is ignored),
and the next run of the command grades it without sending the row again (`ReplyJournal.pending`).
The file is rewritten without the replies that have their record in results.jsonl when a run
ends, and removed when none is left.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .._files import atomic_path
from .._openai import ChatResult
from ._results import JOURNAL_NAME, STATUS_OK, ResultsWriter, json_lines


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
        earlier = [(_identity(entry), entry) for entry in read_journal(self.path)]
        self._recorded = {
            identity for identity, entry in earlier if identity in graded and graded[identity] == entry["reply"]["text"]
        }
        self._pending = {  # the latest per (file, row)
            (entry["file"], entry["row"]): entry for identity, entry in earlier if identity not in self._recorded
        }
        # Flushed, not fsynced: a reply has to outlive the process; after a crash of the machine, the
        # next run sends its row again.
        self._writer = ResultsWriter(self.path, sync=False)

    def pending(self) -> dict[tuple[str, int], dict[str, Any]]:
        """The replies of earlier runs still without a record, the latest per (file, row)."""
        return self._pending

    def write(self, key: dict[str, Any], result: ChatResult) -> None:
        """Store `result` for the row `key` names (file, row, digest, settings)."""
        self._writer.write(key | {"reply": result.model_dump(mode="json")})

    def recorded(self, key: dict[str, Any]) -> None:
        """The row's reply now has its record in results.jsonl: the journal needs it no more."""
        self._recorded.add(_identity(key))

    def close(self) -> None:
        """Close the file, then rewrite it with the replies still waiting for a record (or remove it)."""
        self._writer.close()
        left = [entry for entry in read_journal(self.path) if _identity(entry) not in self._recorded]
        if not left:
            self.path.unlink(missing_ok=True)
            return
        with atomic_path(self.path) as tmp, open(tmp, "w", encoding="utf-8") as handle:
            handle.writelines(json.dumps(entry, ensure_ascii=True) + "\n" for entry in left)


def read_journal(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The well-formed entries, in file order (a torn or corrupt line is skipped)."""
    return [entry for entry in json_lines(path) if _well_formed(entry)]


def _well_formed(entry: Any) -> bool:
    if not isinstance(entry, dict) or not isinstance(entry.get("file"), str) or not isinstance(entry.get("row"), int):
        return False
    try:
        ChatResult.model_validate(entry.get("reply"))
    except ValidationError:
        return False
    return True


def _identity(entry: dict[str, Any]) -> tuple[Any, ...]:
    return (entry.get("file"), entry.get("row"), entry.get("digest"), json.dumps(entry.get("settings"), sort_keys=True))


def reply_of(entry: dict[str, Any]) -> ChatResult:
    return ChatResult.model_validate(entry["reply"])
