"""MRCR v2's part of `mrcr-gen pool harvest` (`Recipe.harvest_rows`): the (ask, writing) turns of
each transcript, for a pool.

A v2 turn is `User: Write a {format} about {topic} in {style} style.` answered by its writing. A
pool's ask is openai/mrcr's `write a {format} about {entity}`, and the v2 ask is one of those with
the style folded into the entity: it is kept as `write a {format} about {topic} in {style} style`
(format `{format}`, entity `{topic} in {style} style`), so that each writing still answers its ask
(only the capital and the final period go). The few-shot block (examples 1 and 2) is skipped, as
openai/mrcr's preamble is, and so is the final query. Rows of one transcript share it: it is read
once (the rows after the first add no pairs).
"""

from __future__ import annotations

import csv
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ..._errors import first_line
from ..._models import Ask
from ..._paths import file_columns
from ...pool._harvest import HarvestedPair
from ...pool._pool import PoolError, parse_ask
from ._rows import V2_COLUMNS, iter_records
from ._text import TRANSCRIPT_OPEN, split_transcript

# `_text.ASK` read back: the format up to the first " about " (as a pool's asks split), then the rest.
ASK_RE = re.compile(r"Write a (?P<format>\S(?:.*?\S)?) about (?P<entity>\S.*? in \S(?:.*\S)? style)\.")


def pool_ask(text: str) -> Ask | None:
    """A v2 ask as a pool's: `Write a poem about tide pools in formal style.` -> format `poem`,
    entity `tide pools in formal style`; None for text that is not a v2 ask."""
    match = ASK_RE.fullmatch(text)
    if match is None:
        return None
    ask = Ask(format=match["format"], entity=match["entity"])
    return ask if parse_ask(ask.text) == ask else None


def check_columns(path: Path) -> None:
    """PoolError, in one line naming the file, unless it is a CSV or parquet file with v2's columns."""
    if path.suffix.lower() == ".csv":
        names = file_columns(path)
        if names is None:
            raise PoolError(f"{path} is not a readable CSV file")
    else:
        try:
            names = pq.read_schema(path).names
        except (OSError, ValueError, pa.ArrowException) as exc:
            raise PoolError(f"{path} is not an MRCR v2 file: {first_line(exc)}") from None
    missing = [name for name in V2_COLUMNS if name not in names]
    if missing:
        raise PoolError(f"{path} is not an MRCR v2 file: missing column(s) {', '.join(missing)}")


def harvest_rows(path: str | os.PathLike) -> Iterator[list[HarvestedPair | None]]:
    """Per row of an MRCR v2 file (CSV or parquet), the (ask, writing) turns of its transcript as
    pool pairs (None for a turn whose ask is not a v2 ask, or that has no writing); a row whose
    transcript is the previous row's gives none. PoolError naming the file (and row) when it is
    not an MRCR v2 file."""
    path = Path(path)
    check_columns(path)
    previous: str | None = None
    try:
        for row, record in enumerate(iter_records(path)):
            queries, view_ops = record.get("queries"), record.get("view_ops")
            if not (isinstance(queries, str) and isinstance(view_ops, str) and view_ops and queries.endswith(view_ops)):
                raise PoolError(f"{path} row {row} is not an MRCR v2 row: view_ops is not the tail of queries")
            transcript = queries[: len(queries) - len(view_ops)]
            if transcript == previous:
                yield []
                continue
            previous = transcript
            split = split_transcript(transcript)
            if split is None:
                raise PoolError(
                    f"{path} row {row} is not an MRCR v2 row: the few-shot block's closing marker "
                    f"'{TRANSCRIPT_OPEN.strip()}' is missing"
                )
            pairs: list[HarvestedPair | None] = []
            for turn in split[1]:
                ask = pool_ask(turn.ask)
                pairs.append(None if ask is None or not turn.text.strip() else HarvestedPair(ask, turn.text))
            yield pairs
    except PoolError:
        raise
    except (OSError, ValueError, KeyError, csv.Error) as exc:
        raise PoolError(f"{path} is not an MRCR v2 file: {first_line(exc)}") from None
