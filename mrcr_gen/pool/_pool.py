"""Pools of writings: a parquet file of (ask, writing) pairs the assembler draws from.

A pool row is a `PoolWriting`: a stable id (hash of ask and text), the ask text, its format and
entity, the writing, its exact o200k token count and where it came from (a model name or the
MRCR file it was harvested from). `PoolWriter` offers a pool to the assembler; its token counts
come from the pool, never from re-tokenizing.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import Field, ValidationError, model_validator

from .._budget import AssemblyError
from .._files import ForeignFile, atomic_path, file_sha256, is_lock_file
from .._models import ASK_TEMPLATE, Ask, Writing, _Frozen
from .._tokens import DEFAULT_TOKENIZER, count_tokens_batch
from ._flags import flag

POOL_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("ask", pa.string()),
        ("format", pa.string()),
        ("entity", pa.string()),
        ("text", pa.string()),
        ("n_tokens", pa.int64()),
        ("source", pa.string()),
    ],
    metadata={b"mrcr_gen.pool": b'{"version": 1}'},
)
POOL_COLUMNS: tuple[str, ...] = tuple(POOL_SCHEMA.names)
POOL_METADATA_KEY = b"mrcr_gen.pool"
ASK_PATTERN = re.compile(r"^write a (?P<format>.+?) about (?P<entity>.+)$", re.DOTALL)


class PoolError(ValueError):
    """A pool file is missing, unreadable or not a pool."""


def is_pool_file(path: Path) -> bool:
    """Whether `path` is a pool mrcr-gen wrote (its parquet metadata has POOL_METADATA_KEY)."""
    try:
        return POOL_METADATA_KEY in (pq.read_schema(path).metadata or {})
    except (OSError, pa.ArrowException):
        return False


def quality_report_path(pool: str | os.PathLike) -> Path:
    """`pool.parquet` -> `pool.quality.json`, beside the pool."""
    pool = Path(pool)
    return pool.with_name(pool.name.removesuffix(".parquet") + ".quality.json")


def check_pool_out(out: str | os.PathLike, companions: Iterable[Path] = ()) -> None:
    """PoolError before a pool is written to `out`: `out` exists and is not a pool mrcr-gen wrote,
    or its quality report or one of its other `companions` (catalog, build report, lock) exists
    beside no such pool. Lock files (`.lock`) left by a run that was killed before it wrote the
    pool are ours (they hold the JSON of their last holder)."""
    out = Path(out)
    if out.exists() or out.is_symlink():
        if not is_pool_file(out):
            raise PoolError(str(ForeignFile(out, "move it away or choose another --out")))
        return
    for path in [quality_report_path(out), *companions]:
        if (path.exists() or path.is_symlink()) and not (path.suffix == ".lock" and is_lock_file(path)):
            raise PoolError(str(ForeignFile(path, "move it away or choose another --out")))


class PoolTooSmall(AssemblyError):
    """A pool cannot fill a request; the message says exactly what is missing."""


def writing_id(ask: str, text: str) -> str:
    """Stable id of a writing: sha256 of the ask and the text (first 16 hex digits)."""
    return hashlib.sha256(f"{ask}\n\x00\n{text}".encode()).hexdigest()[:16]


def parse_ask(text: str) -> Ask | None:
    """`write a {format} about {entity}` -> Ask, split on the first ' about '; None otherwise."""
    match = ASK_PATTERN.match(text)
    if match is None:
        return None
    ask = Ask(format=match["format"], entity=match["entity"])
    return ask if ask.text == text else None


class PoolWriting(_Frozen):
    """One writing of a pool."""

    id: str = Field(pattern=r"^[0-9a-f]{16}$")
    ask: str
    format: str = Field(min_length=1)
    entity: str = Field(min_length=1)
    text: str = Field(min_length=1)
    n_tokens: int = Field(ge=0)
    source: str

    @model_validator(mode="after")
    def _consistent(self) -> PoolWriting:
        if self.ask != ASK_TEMPLATE.format(format=self.format, entity=self.entity):
            raise ValueError(f"ask {self.ask!r} is not 'write a {self.format} about {self.entity}'")
        if self.id != writing_id(self.ask, self.text):
            raise ValueError(f"id {self.id} is not the hash of its ask and text")
        return self

    @classmethod
    def make(cls, ask: Ask, text: str, n_tokens: int, source: str) -> PoolWriting:
        return cls(
            id=writing_id(ask.text, text),
            ask=ask.text,
            format=ask.format,
            entity=ask.entity,
            text=text,
            n_tokens=n_tokens,
            source=source,
        )

    @property
    def ask_model(self) -> Ask:
        return Ask(format=self.format, entity=self.entity)


def dedupe(writings: Iterable[PoolWriting]) -> tuple[list[PoolWriting], int]:
    """Writings with identical (ask, text) dropped (the first kept), and how many were dropped."""
    seen: dict[str, PoolWriting] = {}
    dropped = 0
    for writing in writings:
        if writing.id in seen:
            dropped += 1
        else:
            seen[writing.id] = writing
    return list(seen.values()), dropped


def write_pool(writings: Iterable[PoolWriting], path: str | os.PathLike, tokenizer: str = DEFAULT_TOKENIZER) -> Path:
    """Write a pool atomically, de-duplicated and sorted (ask, id): same writings, same bytes.

    `tokenizer` names what counted `n_tokens`; it is kept in the file's metadata unless it is o200k_base.
    """
    unique, _ = dedupe(writings)
    unique.sort(key=lambda w: (w.ask, w.id))
    schema = POOL_SCHEMA
    if tokenizer != DEFAULT_TOKENIZER:
        schema = schema.with_metadata({POOL_METADATA_KEY: json.dumps({"version": 1, "tokenizer": tokenizer}).encode()})
    table = pa.Table.from_pylist([w.model_dump() for w in unique], schema=schema)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd")
    return Path(path)


def write_pool_of(
    finished: Sequence[tuple[Ask, str]], source: str, out: str | os.PathLike
) -> tuple[list[PoolWriting], int]:
    """Write the pool of model-written (ask, text) pairs, each counted with o200k and recorded as
    written by `source`; (its writings, identical writings merged)."""
    counts = count_tokens_batch([text for _, text in finished])
    writings, duplicates = dedupe(
        PoolWriting.make(ask, text, n, source) for (ask, text), n in zip(finished, counts, strict=True)
    )
    write_pool(writings, out)
    return writings, duplicates


def read_pool(path: str | os.PathLike) -> list[PoolWriting]:
    """Every writing of a pool file (validated)."""
    path = Path(path)
    if not path.is_file():
        raise PoolError(f"pool {path} does not exist")
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as exc:
        raise PoolError(f"pool {path} is not a readable parquet file: {exc}") from None
    missing = [c for c in POOL_COLUMNS if c not in table.column_names]
    if missing:
        raise PoolError(f"{path} is not a pool: missing column(s) {', '.join(missing)}")
    writings = []
    for row, record in enumerate(table.select(list(POOL_COLUMNS)).to_pylist()):
        try:
            writings.append(PoolWriting(**record))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            problem = first["msg"].removeprefix("Value error, ")
            raise PoolError(f"{path} row {row} is invalid: {where + ': ' if where else ''}{problem}") from None
    return writings


def pool_tokenizer(path: str | os.PathLike) -> str:
    """The tokenizer that counted a pool's `n_tokens` (o200k_base when its metadata names none)."""
    try:
        metadata = pq.read_schema(path).metadata or {}
        return json.loads(metadata.get(POOL_METADATA_KEY, b"{}")).get("tokenizer", DEFAULT_TOKENIZER)
    except (OSError, ValueError, pa.ArrowException):
        return DEFAULT_TOKENIZER


class PoolWriter:
    """The Writer protocol over a pool: asks present in it, variants = its distinct writings per ask."""

    name = "pool"

    def __init__(
        self,
        writings: Sequence[PoolWriting],
        *,
        path: str | os.PathLike | None = None,
        sha256: str | None = None,
        tokenizer: str = DEFAULT_TOKENIZER,
    ):
        self.path = Path(path) if path is not None else None
        self.sha256 = sha256
        self.tokenizer = tokenizer
        groups: dict[Ask, dict[str, PoolWriting]] = {}
        for writing in writings:
            per_ask = groups.setdefault(writing.ask_model, {})
            per_ask.setdefault(writing.text, writing)
        self._asks = sorted(groups, key=lambda a: a.text)
        # Writings first, flagged replies (empty, refusals, talk about the ask) last: variants
        # 0..needle_variants(ask)-1 are the ones a needle slot may take.
        flagged = {w.id for per_ask in groups.values() for w in per_ask.values() if flag(w.text) is not None}
        ordered = {ask: sorted(groups[ask].values(), key=lambda w: (w.id in flagged, w.id)) for ask in self._asks}
        self._pool = {ask: [Writing(text=w.text, n_tokens=w.n_tokens) for w in ordered[ask]] for ask in self._asks}
        self._needle_counts = {ask: sum(1 for w in ordered[ask] if w.id not in flagged) for ask in self._asks}
        self._sources = Counter(w.source for per_ask in groups.values() for w in per_ask.values())

    @classmethod
    def from_file(cls, path: str | os.PathLike, tokenizer: str = DEFAULT_TOKENIZER) -> PoolWriter:
        """A pool's writings counted by `tokenizer`: recounted (exactly) when the pool was counted by another."""
        writings = read_pool(path)
        if pool_tokenizer(path) != tokenizer:
            counts = count_tokens_batch([w.text for w in writings], tokenizer=tokenizer)
            writings = [w.model_copy(update={"n_tokens": n}) for w, n in zip(writings, counts, strict=True)]
        return cls(writings, path=path, sha256=file_sha256(path), tokenizer=tokenizer)

    # -- Writer protocol ---------------------------------------------------------------------
    def asks(self) -> Sequence[Ask]:
        return self._asks

    def n_variants(self, ask: Ask) -> int:
        return len(self._pool.get(ask, ()))

    def needle_variants(self, ask: Ask) -> int:
        """How many of `ask`'s variants may fill a needle slot: the first ones, none of them flagged."""
        return self._needle_counts.get(ask, 0)

    def writings(self, keys: Sequence[tuple[Ask, int]]) -> list[Writing]:
        out = []
        for ask, variant in keys:
            variants = self._pool.get(ask)
            if not variants or not 0 <= variant < len(variants):
                raise AssemblyError(f"pool has no writing {variant} for '{ask}' ({len(variants or ())} available)")
            out.append(variants[variant])
        return out

    def describe(self) -> dict:
        return {
            "name": self.name,
            "path": str(self.path) if self.path is not None else None,
            "sha256": self.sha256,
            "writings": self.n_writings,
            "asks": len(self._asks),
            "formats": len({a.format for a in self._asks}),
            "entities": len({a.entity for a in self._asks}),
            "tokens": self.total_tokens,
            "sources": dict(sorted(self._sources.items())),
        }

    # -- sizing --------------------------------------------------------------------------------
    @property
    def n_writings(self) -> int:
        return sum(len(v) for v in self._pool.values())

    @property
    def total_tokens(self) -> int:
        return sum(w.n_tokens for v in self._pool.values() for w in v)


def catalog_summary(writings: Sequence[PoolWriting], pair_counts: tuple[Counter, Counter] | None = None) -> dict:
    """Entities and formats of a pool with counts (writings per name; pairs seen when given)."""
    formats = Counter(w.format for w in writings)
    entities = Counter(w.entity for w in writings)
    summary = {
        "writings": len(writings),
        "asks": len({w.ask for w in writings}),
        "formats": dict(sorted(formats.items(), key=lambda kv: (-kv[1], kv[0]))),
        "entities": dict(sorted(entities.items(), key=lambda kv: (-kv[1], kv[0]))),
    }
    if pair_counts is not None:
        summary["pairs_per_format"] = dict(sorted(pair_counts[0].items(), key=lambda kv: (-kv[1], kv[0])))
        summary["pairs_per_entity"] = dict(sorted(pair_counts[1].items(), key=lambda kv: (-kv[1], kv[0])))
    return summary


def dumps_json(obj: object) -> str:
    return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"
