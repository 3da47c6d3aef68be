"""Harvest (ask, writing) pairs of openai/mrcr parquet files (the official ones included) into a pool.

`harvest_rows` is openai/mrcr's part of `mrcr-gen pool harvest` (`Recipe.harvest_rows`): the pairs
of `messages[1:-1]` of each row, asks `write a {format} about {entity}` as they are. The counting,
de-duplication and writing are the pool's (`mrcr_gen.pool._harvest`); `harvest` here takes
openai/mrcr files only (`mrcr_gen.harvest` takes every recipe's).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import ValidationError

from ..._errors import first_line
from ..._tokens import DEFAULT_TOKENIZER
from ...pool._harvest import HarvestedPair, HarvestReport, catalog_path, harvest_files, source_label
from ...pool._pool import PoolError, parse_ask
from ._rows import MRCR_COLUMNS, iter_rows

V2_COLUMN = "queries"  # MRCR v2's prompt column: such a file is not openai/mrcr's


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


def check_columns(path: Path) -> None:
    """PoolError, in one line naming the file, unless it is a parquet file with openai/mrcr's columns."""
    if path.suffix.lower() == ".csv":
        raise PoolError(f"{path} is a CSV file, not an openai/mrcr parquet file")
    try:
        names = pq.read_schema(path).names
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise PoolError(f"{path} is not an MRCR parquet file: {first_line(exc)}") from None
    if V2_COLUMN in names:
        raise PoolError(f"{path} is an MRCR v2 file (column '{V2_COLUMN}'), not an openai/mrcr one")
    missing = [name for name in MRCR_COLUMNS if name not in names]
    if missing:
        raise PoolError(f"{path} is not an openai/mrcr parquet file: missing column(s) {', '.join(missing)}")


def harvest_rows(path: str | os.PathLike) -> Iterator[list[HarvestedPair | None]]:
    """Per row of an openai/mrcr parquet file, its (ask, writing) pairs (None for a message pair
    that is not an ask `write a {format} about {entity}` and a writing). PoolError naming the file
    (and row) when it is not such a file."""
    path = Path(path)
    check_columns(path)
    row = 0
    try:
        for mrcr_row in iter_rows(path):
            pairs: list[HarvestedPair | None] = []
            for pair in pairs_of(json.loads(mrcr_row.prompt)):
                ask = None if pair is None else parse_ask(pair[0])
                pairs.append(None if pair is None or ask is None else HarvestedPair(ask, pair[1]))
            yield pairs
            row += 1
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        problem = first["msg"].removeprefix("Value error, ")
        detail = f"{where}: {problem}" if where else problem
        raise PoolError(f"{path} row {row} is not an openai/mrcr row: {detail}") from None
    except (OSError, ValueError, KeyError) as exc:
        raise PoolError(f"{path} is not an MRCR parquet file: {first_line(exc)}") from None


def harvest(
    paths: Sequence[str | os.PathLike],
    out: str | os.PathLike,
    *,
    on_row: Callable[[], None] | None = None,
    tokenizer: str = DEFAULT_TOKENIZER,
) -> HarvestReport:
    """Write every distinct (ask, writing) pair of openai/mrcr files to a pool, and the catalog
    found; each writing counted with `tokenizer`. PoolError (nothing written) for a file that is
    not openai/mrcr's, or when the pool would be empty (see `mrcr_gen.pool._harvest`)."""
    return harvest_files(paths, out, harvest_rows, on_row=on_row, tokenizer=tokenizer)


__all__ = ["HarvestReport", "catalog_path", "harvest", "harvest_rows", "pairs_of", "source_label"]
