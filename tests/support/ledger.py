"""The test server's account book: every request sent, every reply billed and every reply delivered,
by the content of the request, so a test can hold a run folder's resends and reported usage against
what the account paid (tests/eval/test_batch_state_machine.py).

`ChatServer.ledger` records an `Event` for each online request when it arrives (`sent`), each
HTTP-200 reply it answers (`billed`, then `delivered`), each line of a batch when the batch is made
(`sent`), each line a batch finished with HTTP 200 when it ends (`billed`: expired requests and
failed batches cost nothing) and each line of an output or error file when its content is
downloaded (`delivered`). A delivered line is `ok` when it is a readable HTTP-200 reply that no
other line of its file contradicts: a torn line, and both lines of a conflicting pair, are not.
Every event carries the request's content `key` (`request_key`) and the server's `tag` when the
request was made (the test sets `ChatServer.tag` before each command).
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

SENT, BILLED, DELIVERED = "sent", "billed", "delivered"
#: Server attributes a checkpoint leaves alone: its socket, thread, locks and events.
_NOT_STATE = frozenset({"_lock", "_httpd", "_thread", "_unstall"})


def request_key(messages: Sequence[dict]) -> str:
    """The content key of a chat request: the sha256 of its messages (rows with the same content share it)."""
    return hashlib.sha256(json.dumps(list(messages), sort_keys=True, ensure_ascii=False).encode()).hexdigest()


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0

    @classmethod
    def of(cls, usage: dict[str, Any]) -> Usage:
        cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
        return cls(usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0), cached)

    def __add__(self, other: Usage) -> Usage:
        return Usage(*(a + b for a, b in zip(self.fields(), other.fields(), strict=True)))

    def __mul__(self, times: int) -> Usage:
        return Usage(*(a * times for a in self.fields()))

    def fields(self) -> tuple[int, int, int]:
        return self.prompt_tokens, self.completion_tokens, self.cached_tokens


@dataclass(frozen=True)
class Event:
    kind: str  # SENT | BILLED | DELIVERED
    key: str
    tag: str | None
    channel: str  # "online" | "batch"
    reply_id: str | None = None
    usage: Usage = Usage()
    ok: bool = False  # delivered: a readable, uncontradicted HTTP-200 reply
    conflict: bool = False  # delivered: one of two HTTP-200 replies that differ for one request


class Ledger:
    """The events in the order they happened (appends are atomic under the GIL)."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def add(self, event: Event) -> None:
        self.events.append(event)

    def since(self, start: int) -> list[Event]:
        return list(self.events[start:])

    def __len__(self) -> int:
        return len(self.events)

    def billed(self, tags: Iterable[str | None] | None = None) -> dict[str, list[Event]]:
        """The billed replies by content key (of the requests made under `tags`, or all)."""
        wanted = None if tags is None else set(tags)
        found: dict[str, list[Event]] = {}
        for event in list(self.events):
            if event.kind == BILLED and (wanted is None or event.tag in wanted):
                found.setdefault(event.key, []).append(event)
        return found


def checkpoint(server: Any) -> dict[str, Any]:
    """A deep copy of the server's state (counters, files, batches, ledger, behaviour) for `restore`."""
    with server._lock:
        return copy.deepcopy({name: value for name, value in vars(server).items() if name not in _NOT_STATE})


def restore(server: Any, saved: dict[str, Any]) -> None:
    """Put the server back as `checkpoint` found it (what was made since is forgotten)."""
    with server._lock:
        for name, value in copy.deepcopy(saved).items():
            setattr(server, name, value)
