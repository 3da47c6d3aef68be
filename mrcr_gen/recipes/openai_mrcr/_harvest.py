"""Harvest (ask, writing) pairs from MRCR parquet files (the official ones included) into a pool."""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from ..._files import write_text_atomic
from ..._models import _Frozen
from ..._paths import hub_source
from ..._tokens import DEFAULT_TOKENIZER, count_tokens_batch, load_tokenizer
from ...pool._pool import PoolError, PoolWriting, catalog_summary, dedupe, dumps_json, parse_ask, write_pool
from ._rows import iter_rows


class HarvestReport(_Frozen):
    files: tuple[str, ...]
    rows: int
    pairs: int  # (ask, writing) pairs seen, preamble and final query excluded
    duplicates: int  # identical (ask, writing) pairs dropped
    unparsed: int  # pairs whose user message is not `write a {format} about {entity}` (skipped)
    writings: int  # distinct writings in the pool
    asks: int
    formats: int
    entities: int
    tokens: int  # tokens of the pool's writings, by `tokenizer`
    tokenizer: str = DEFAULT_TOKENIZER
    out: str
    catalog: str


def catalog_path(out: str | os.PathLike) -> Path:
    """`pool.parquet` -> `pool.catalog.json`, beside the pool."""
    out = Path(out)
    return out.with_name(out.name.removesuffix(".parquet") + ".catalog.json")


def source_label(path: Path) -> str:
    """What a harvested writing records as its source: the file, with its parent folder."""
    return f"{path.parent.name}/{path.name}" if path.parent.name else path.name


def pairs_of(messages: object) -> Iterable[tuple[str, str] | None]:
    """(ask, writing) for messages[1:-1]: the preamble (first) and final query (last) are skipped.

    Yields None for a position that is not a user message followed by an assistant one, both
    with text content. A prompt that is not a list of messages is a ValueError.
    """
    if not isinstance(messages, list):
        raise ValueError(f"prompt is a JSON {type(messages).__name__}, not a list of messages")
    body = messages[1:-1]
    for i in range(0, len(body) - 1, 2):
        user, assistant = body[i], body[i + 1]
        if not (
            isinstance(user, dict)
            and isinstance(assistant, dict)
            and user.get("role") == "user"
            and assistant.get("role") == "assistant"
            and isinstance(user.get("content"), str)
            and isinstance(assistant.get("content"), str)
        ):
            yield None
        else:
            yield user["content"], assistant["content"]


def harvest(
    paths: Sequence[str | os.PathLike],
    out: str | os.PathLike,
    *,
    on_row: Callable[[], None] | None = None,
    tokenizer: str = DEFAULT_TOKENIZER,
) -> HarvestReport:
    """Write every distinct (ask, writing) pair of MRCR files to a pool, and the catalog found;
    each writing counted with `tokenizer`."""
    load_tokenizer(tokenizer)
    files = [Path(p) for p in paths]
    for path in files:
        if not path.is_file():
            raise PoolError(f"{path} does not exist")
    writings: list[PoolWriting] = []
    seen: set[tuple[str, str]] = set()
    pair_formats: Counter[str] = Counter()
    pair_entities: Counter[str] = Counter()
    rows = pairs = duplicates = unparsed = 0
    for path in files:
        source = source_label(path)
        try:
            row_iter = iter_rows(path)
            for row in row_iter:
                rows += 1
                fresh: list[tuple] = []
                for pair in pairs_of(json.loads(row.prompt)):
                    pairs += 1
                    if pair is None:
                        unparsed += 1
                        continue
                    ask_text, text = pair
                    ask = parse_ask(ask_text)
                    if ask is None or not text:
                        unparsed += 1
                        continue
                    pair_formats[ask.format] += 1
                    pair_entities[ask.entity] += 1
                    if (ask_text, text) in seen:
                        duplicates += 1
                        continue
                    seen.add((ask_text, text))
                    fresh.append((ask, text))
                counts = count_tokens_batch([text for _, text in fresh], tokenizer=tokenizer)
                writings += [
                    PoolWriting.make(ask, text, n, source) for (ask, text), n in zip(fresh, counts, strict=True)
                ]
                if on_row is not None:
                    on_row()
        except (OSError, ValueError, KeyError) as exc:
            raise PoolError(f"{path} is not an MRCR parquet file: {str(exc).splitlines()[0]}") from None
    writings, dropped = dedupe(writings)
    duplicates += dropped
    write_pool(writings, out, tokenizer)
    catalog = catalog_summary(writings, (pair_formats, pair_entities))
    catalog = {"files": [str(p) for p in files], "rows": rows, "pairs": pairs, "duplicates": duplicates, **catalog}
    if tokenizer != DEFAULT_TOKENIZER:
        catalog["tokenizer"] = load_tokenizer(tokenizer).describe()
    hub = {str(p): url for p in files if (url := hub_source(p)) is not None}
    if hub:
        catalog["hub_sources"] = hub
    write_text_atomic(catalog_path(out), dumps_json(catalog))
    return HarvestReport(
        files=tuple(str(p) for p in files),
        rows=rows,
        pairs=pairs,
        duplicates=duplicates,
        unparsed=unparsed,
        writings=len(writings),
        asks=catalog["asks"],
        formats=len(catalog["formats"]),
        entities=len(catalog["entities"]),
        tokens=sum(w.n_tokens for w in writings),
        tokenizer=tokenizer,
        out=str(out),
        catalog=str(catalog_path(out)),
    )
