"""The cache of model-written writings both recipes' LLM writers share (sqlite, keyed by request).

A writing is keyed by everything that decides it: the endpoint that wrote it (`_openai.endpoint`:
two servers serving the same model name write different text), the model, the request's
parameters, the ask and the variant. Caches of mrcr-gen 0.1.0 before this key did not record the
endpoint: which server wrote their writings cannot be known, so they are refused (`LegacyCache`)
rather than reused for whatever endpoint is asked now.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .._models import Ask
from ._pool import PoolError

CACHE_FILE = "writings.sqlite3"


def default_cache_dir() -> Path:
    """`$MRCR_GEN_CACHE`, else `$XDG_CACHE_HOME/mrcr-gen`, else `~/.cache/mrcr-gen`."""
    if os.environ.get("MRCR_GEN_CACHE"):
        return Path(os.environ["MRCR_GEN_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "mrcr-gen"


def cache_key(endpoint: str, model: str, params: Mapping[str, Any], ask_text: str, variant: int) -> str:
    """sha256 of what decides a writing; `endpoint` as `mrcr_gen._openai.endpoint` normalises it."""
    payload = json.dumps(
        {"endpoint": endpoint, "model": model, "params": dict(params), "ask": ask_text, "variant": variant},
        sort_keys=True,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class LegacyCache(PoolError):
    """A cache written before writings were keyed by their endpoint."""


class WritingCache:
    """Finished writings in SQLite (WAL, synchronous=FULL): each one durable as soon as it is stored."""

    def __init__(self, directory: str | os.PathLike) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path = self.directory / CACHE_FILE
        self._db = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        columns = [row[1] for row in self._db.execute("PRAGMA table_info(writings)")]
        if columns and "endpoint" not in columns:
            self._db.close()
            raise LegacyCache(
                f"{self.path} holds writings cached by an older mrcr-gen, which did not record the server that "
                "wrote them; rebuild them in another cache (--cache-dir DIR, or MRCR_GEN_CACHE), or delete that file"
            )
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute(
            """CREATE TABLE IF NOT EXISTS writings (
                key TEXT PRIMARY KEY, endpoint TEXT NOT NULL, model TEXT NOT NULL, params TEXT NOT NULL,
                ask TEXT NOT NULL, variant INTEGER NOT NULL, text TEXT NOT NULL, prompt_tokens INTEGER,
                completion_tokens INTEGER, finish_reason TEXT, served_model TEXT, created REAL NOT NULL)"""
        )

    def get_many(self, keys: Sequence[str]) -> dict[str, tuple[str, str | None]]:
        """key -> (text, finish_reason) for the keys present."""
        found: dict[str, tuple[str, str | None]] = {}
        for start in range(0, len(keys), 500):
            chunk = list(keys[start : start + 500])
            marks = ",".join("?" * len(chunk))
            for key, text, finish in self._db.execute(
                f"SELECT key, text, finish_reason FROM writings WHERE key IN ({marks})", chunk
            ):
                found[key] = (text, finish)
        return found

    def put(
        self, key: str, endpoint: str, model: str, params: Mapping[str, Any], ask: Ask, variant: int, result: Any
    ) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO writings VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                key,
                endpoint,
                model,
                json.dumps(dict(params), sort_keys=True),
                ask.text,
                variant,
                result.text,
                result.prompt_tokens,
                result.completion_tokens,
                result.finish_reason,
                result.model,
                time.time(),
            ),
        )

    def put_all(self, rows: Sequence[tuple[str, str, str, Mapping[str, Any], Ask, int, Any]]) -> None:
        """`put` every row in one transaction: all of them are stored, or (killed, failed) none."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            for row in rows:
                self.put(*row)
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def __len__(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM writings").fetchone()[0]

    def close(self) -> None:
        self._db.close()
