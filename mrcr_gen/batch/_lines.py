"""Batch files line by line: the OpenAI batch input format (one request per line, keyed by
`custom_id`) and the one reader of output and error files (OpenAI's, and `vllm run-batch`'s,
which has the same shape), with the rules every consumer follows:

- a line that is not JSON, or JSON of another shape (a torn line: a cut-off download, a
  corrupted file), is reported in `OutputRead.torn` and does not stop the other lines from being
  read: the paid replies are still used; the request of a torn line has no outcome, so its
  consumer treats it as a request without a reply (an error a rerun resends);
- a reply (HTTP 200) wins over an error line for the same `custom_id`;
- two replies for one `custom_id` that say the same (same `choices`) are one reply, counted in
  `duplicates`; replies that differ are reported in `conflicts`, and the one kept is chosen by
  content (the smallest canonical JSON of its `choices`), never by line order, so the same file
  in any order gives the same result. Nothing is sent again for it: both are paid already;
- a file whose lines are requests (the batch input file given by mistake) is refused (BatchError);
- `foreign` lists the custom ids a consumer's request set never had (`OutputRead.foreign_to`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

CHAT_URL = "/v1/chat/completions"
#: The check of a row error: the batch expired before its request ran.
EXPIRED = "batch_expired"
#: The check of a row error: its batch failed or was cancelled, or gave no readable line for it.
BATCH_FAILED = "batch_failed"
#: The check of a row error: the results file has no line for it.
NOT_IN_RESULTS = "not_in_results"
#: The check of a row error: its request alone is larger than a batch file may be.
TOO_LARGE = "batch_too_large"
#: How the OpenAI Batch API's output lines begin their `id` (vllm run-batch's begin with `vllm-`).
OPENAI_LINE_ID = "batch_req_"
#: How many torn lines `OutputRead.problems` names one by one.
SHOWN = 10


class BatchError(ValueError):
    """Bad input to the batch machinery (an unreadable record, a request file given as output):
    the consumer reports it as one line, exit code 2."""


def encoded_line(line: dict[str, Any]) -> bytes:
    """One line of a batch input file, as bytes."""
    return (json.dumps(line, ensure_ascii=False) + "\n").encode("utf-8", "surrogatepass")


def request_line(custom_id: str, body: dict[str, Any], url: str = CHAT_URL) -> dict[str, Any]:
    """One request of a batch input file: `body` POSTed to `url`, keyed by `custom_id`."""
    return {"custom_id": custom_id, "method": "POST", "url": url, "body": body}


#: A dated snapshot of a model, as the Batch API names the model of its replies
#: (`gpt-4.1-mini-2025-04-14` for `gpt-4.1-mini`; older ones `gpt-4-0613`).
_SNAPSHOT = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{4})")


def same_model(replied: str, asked: str) -> bool:
    """Whether a reply's `model` is the model asked for: the same name, or a dated snapshot of it."""
    if replied == asked:
        return True
    return replied.startswith(asked) and _SNAPSHOT.fullmatch(replied[len(asked) :]) is not None


@dataclass(frozen=True)
class Outcome:
    """What a batch gave for one request: a response body (HTTP 200), or an error."""

    body: dict[str, Any] | None = None
    status: int | None = None
    error: str | None = None
    code: str | None = None
    batch_id: str | None = None

    @property
    def ok(self) -> bool:
        return self.body is not None


def _message(error: Any) -> tuple[str | None, str | None]:
    """(message, code) of an error as the files give it: OpenAI's `{"code", "message"}`, vLLM's
    ErrorResponse (`{"error": {...}}` or flat), or a bare string."""
    if isinstance(error, dict):
        inner = error.get("error", error)
        if isinstance(inner, dict):
            message = inner.get("message")
            code = inner.get("code")
            return (str(message) if message is not None else json.dumps(inner)), (None if code is None else str(code))
        return str(inner), None
    if error is None:
        return None, None
    return str(error), None


def _is_request(line: Any) -> bool:
    return isinstance(line, dict) and "response" not in line and "body" in line and ("url" in line or "method" in line)


def outcome_of(line: Any, batch_id: str | None = None) -> tuple[str, Outcome] | None:
    """(custom_id, outcome) of one line of an output or error file; None for a line of another shape."""
    if not isinstance(line, dict) or not isinstance(line.get("custom_id"), str):
        return None
    if "response" not in line and "error" not in line:
        return None
    response: dict[str, Any] = line["response"] if isinstance(line.get("response"), dict) else {}
    status = response.get("status_code")
    status = status if isinstance(status, int) and not isinstance(status, bool) else None
    body = response.get("body")
    error = line.get("error")
    if error is None and status == 200 and isinstance(body, dict):
        return line["custom_id"], Outcome(body=body, status=200, batch_id=batch_id)
    message, code = _message(error)
    if message is None and isinstance(body, dict):
        message, code = _message(body)
    if message is None:
        message = f"HTTP {status}" if status is not None else "no response"
    return line["custom_id"], Outcome(status=status, error=message, code=code, batch_id=batch_id)


def _reply_key(outcome: Outcome) -> str:
    """What a reply says (its `choices`, canonical JSON): equal keys are one reply."""
    body = outcome.body or {}
    return json.dumps(body.get("choices"), sort_keys=True, ensure_ascii=False)


@dataclass
class OutputRead:
    """What one or more output/error files gave: an outcome per custom_id, and what was wrong."""

    outcomes: dict[str, Outcome] = field(default_factory=dict)
    torn: list[str] = field(default_factory=list)  # "path:line" of lines that are not output lines
    conflicts: list[str] = field(default_factory=list)  # custom ids with replies that differ
    duplicates: int = 0  # replies repeated word for word (kept once)
    batch_api: bool = False  # lines of the OpenAI Batch API (ids `batch_req_...`), billed at its discount

    def add(self, custom_id: str, outcome: Outcome) -> None:
        known = self.outcomes.get(custom_id)
        if known is None or (outcome.ok and not known.ok):
            self.outcomes[custom_id] = outcome
        elif outcome.ok and known.ok:
            new, old = _reply_key(outcome), _reply_key(known)
            if new == old:
                self.duplicates += 1
                return
            if custom_id not in self.conflicts:
                self.conflicts.append(custom_id)
            if new < old:
                self.outcomes[custom_id] = outcome

    def merge(self, other: OutputRead) -> None:
        for custom_id, outcome in other.outcomes.items():
            self.add(custom_id, outcome)
        self.torn += other.torn
        self.conflicts += [c for c in other.conflicts if c not in self.conflicts]
        self.duplicates += other.duplicates
        self.batch_api = self.batch_api or other.batch_api

    def foreign_to(self, request_ids: Collection[str]) -> list[str]:
        """The custom ids of these files that `request_ids` never had."""
        return sorted(set(self.outcomes) - set(request_ids))

    def problems(self) -> list[str]:
        """One line for each thing a user should know about these files."""
        lines = [f"{where}: not a batch output line (torn or corrupted); ignored" for where in self.torn[:SHOWN]]
        if len(self.torn) > SHOWN:
            lines.append(f"... and {len(self.torn) - SHOWN} more lines that are not batch output lines")
        lines += [
            f"{custom_id}: replies that differ for one request; kept the one chosen by content, not line order"
            for custom_id in self.conflicts
        ]
        if self.duplicates:
            lines.append(f"{self.duplicates} replies repeated word for word; each kept once")
        return lines


def read_output(path: str | os.PathLike, batch_id: str | None = None) -> OutputRead:
    """The outcomes of a batch output or error file (see the module docstring); BatchError for a
    request file, OSError when it cannot be read."""
    read = OutputRead()
    with open(path, encoding="utf-8", errors="surrogateescape") as handle:
        for number, text in enumerate(handle, 1):
            if not text.strip():
                continue
            try:
                line = json.loads(text)
            except ValueError:
                line = None
            if _is_request(line):
                raise BatchError(
                    f"{path} is a batch request file (line {number} is a request, not a reply): "
                    "give the output file the batch wrote"
                )
            found = outcome_of(line, batch_id)
            if found is None:
                read.torn.append(f"{path}:{number}")
                continue
            read.add(*found)
            read.batch_api = read.batch_api or str(line.get("id", "")).startswith(OPENAI_LINE_ID)
    return read


def read_outputs(paths: Iterable[str | os.PathLike], batch_id: str | None = None) -> OutputRead:
    """`read_output` of several files (a batch's output and error files), merged."""
    read = OutputRead()
    for path in paths:
        read.merge(read_output(path, batch_id))
    return read


def reply_models(read: OutputRead) -> set[str]:
    """The `model` of every reply read."""
    return {str(o.body["model"]) for o in read.outcomes.values() if o.ok and o.body and o.body.get("model")}
