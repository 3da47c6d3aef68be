"""What MRCR v2's checks count of a row, counted once in its life.

A row's checks need three counts: the tokens of its whole `queries`, those of the writing its
query asks for, and the [start, end) token span of each of its key's turns. The generator records
them on the row's sidecar line (`counted`, sealed with the totals to the file and the tokenizer:
`mrcr_gen._counts`); the validator takes them from there when the seal holds, else from a cache in
the user cache folder keyed by the row's content and the tokenizer (`CountedCache`), else counts
them and adds them to the cache. Nothing here can change a finding: a sidecar line that fails its
seal is ignored, and counts are used only for the turns and the writing they were counted for.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

from ..._counts import CheckedCache, CheckedLines, RowCounts

#: The cache's folder inside the token-count cache's (one file per tokenizer).
FOLDER = "mrcr-v2"


@dataclass(frozen=True)
class RowCounted:
    """A v2 row's counts: `tokens` of its `queries`, `answer` of the writing its query asks for (None:
    the ordinal names no turn), `positions` the spans of its key's turns `turns` (indices after the
    few-shot block) among the transcript's `n_turns` turns."""

    tokens: int
    answer: int | None
    n_turns: int
    turns: tuple[int, ...]
    positions: tuple[tuple[int, int], ...]

    def record(self) -> dict[str, Any]:
        """What a sidecar line records under `counted` (its `n_tokens` holds `tokens`)."""
        positions = [list(p) for p in self.positions]
        return {
            "answer_tokens": self.answer,
            "n_turns": self.n_turns,
            "turns": list(self.turns),
            "positions": positions,
        }

    @classmethod
    def from_record(cls, tokens: int, counted: object) -> RowCounted | None:
        """The counts a sidecar line's `counted` holds, or None when it is not their shape."""
        if not isinstance(counted, dict):
            return None
        answer, turns, positions = counted.get("answer_tokens"), counted.get("turns"), counted.get("positions")
        n_turns = counted.get("n_turns")
        if not (answer is None or _is_int(answer)) or not _is_int(n_turns):
            return None
        if not isinstance(turns, list) or not isinstance(positions, list):
            return None
        if not all(_is_int(t) for t in turns) or len(positions) != len(turns):
            return None
        if not all(isinstance(p, list) and len(p) == 2 and all(map(_is_int, p)) for p in positions):
            return None
        return cls(tokens, answer, n_turns, tuple(turns), tuple((p[0], p[1]) for p in positions))

    def fits(self, n_turns: int, turns: list[int], answered: bool) -> bool:
        """Whether these are counts of the turns a row's checks found: as many turns in all (a
        transcript's turns are where its heads are, so the same number means the same turns), its
        key's the same, and a writing asked for (`answered`) exactly when these count one."""
        return self.n_turns == n_turns and self.turns == tuple(turns) and (self.answer is not None) == answered


def _is_int(value: object) -> TypeGuard[int]:
    """An int as JSON gives it (not a bool)."""
    return type(value) is int


def row_key(transcript_id: str, view_ops: str) -> str:
    """What a row's counts are a function of: its `queries` (a transcript, by its id, and its query)."""
    data = f"{transcript_id}\t{view_ops}".encode("utf-8", "surrogatepass")
    return hashlib.blake2b(data, digest_size=16).hexdigest()


class CountedCache(CheckedCache[RowCounted]):
    """Rows' counts by `row_key`, for one tokenizer, beside the token-count cache (`CountCache`'s
    folder / mrcr-v2 / <tokenizer key>.tsv): a `CheckedLines` file (one checked line per row,
    appended by concurrent runs, compacted), loaded on first use."""

    def __init__(self, folder: Path, tokenizer_key: str) -> None:
        super().__init__(CheckedLines(folder / FOLDER / f"{tokenizer_key}.tsv", tokenizer_key), _row_of, _row_value)


def _row_value(counted: RowCounted) -> str:
    """What a cache line holds of a row's counts: their JSON, `tokens` beside the sidecar's record."""
    return json.dumps({"tokens": counted.tokens, **counted.record()}, separators=(",", ":"))


def _row_of(value: str) -> RowCounted | None:
    """The counts a cache line's value holds, or None when it is not their shape."""
    try:
        record = json.loads(value)
        return RowCounted.from_record(record["tokens"], record) if _is_int(record.get("tokens")) else None
    except (ValueError, TypeError, AttributeError, KeyError):
        return None


class KnownCounts:
    """Where a v2 file's checker takes a row's counts from: its sealed sidecar line, then the cache
    (unless `--no-cache`: `counts.cache` is None); `put` records those it had to count."""

    def __init__(self, counts: RowCounts) -> None:
        self.sidecar = counts.sidecar
        self.cache = None if counts.cache is None else CountedCache(counts.cache.folder, counts.cache.key)

    def get(self, row: int, key: str, sidecar: bool = True) -> RowCounted | None:
        """The counts of row `row` (`key`: its `row_key`); not its sidecar line's unless `sidecar`."""
        totals = self.sidecar.get(row) if sidecar else None
        found = None if totals is None else RowCounted.from_record(totals[1], self.sidecar.counted(row))
        if found is None and self.cache is not None:
            found = self.cache.get(key)
        return found

    def put(self, key: str, counted: RowCounted) -> None:
        if self.cache is not None:
            self.cache.put(key, counted)
