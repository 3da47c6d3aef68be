"""Reading MRCR rows for evaluation: token counts, bins, filters."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from .._bins import BINS, bin_for_tokens
from .._models import MrcrRow
from .._parquet import iter_rows
from .._tokens import count_tokens_batch

BELOW_BINS = f"<{BINS[0].lower}"
ABOVE_BINS = f">{BINS[-1].upper}"


def bin_label(n_tokens: int) -> str:
    """The openai/mrcr bin label of a prompt+answer token count ('<4096'/'>1048576' outside)."""
    found = bin_for_tokens(n_tokens)
    if found is not None:
        return found.label
    return BELOW_BINS if n_tokens < BINS[0].lower else ABOVE_BINS


def bin_sort_key(label: str) -> tuple[int, str]:
    """Order bin labels by context length."""
    if label == BELOW_BINS:
        return (0, label)
    if label == ABOVE_BINS:
        return (2**62, label)
    try:
        return (int(label.rstrip("]").split(",")[1]), label)
    except (IndexError, ValueError):
        return (2**61, label)


def bin_upper(label: str) -> int | None:
    """Upper edge of a bin label, None for labels outside the bins."""
    key = bin_sort_key(label)[0]
    return key if 0 < key < 2**61 else None


class RowInfo(BaseModel):
    """One row of a data file, ready to be sent: messages as the seed sends them, plus counts."""

    model_config = ConfigDict(frozen=True)

    file: str
    row: int
    messages: list[dict]
    answer: str
    random_string: str
    n_needles: int
    prompt_tokens: int
    total_tokens: int

    @property
    def bin(self) -> str:
        return bin_label(self.total_tokens)


def data_key(path: str | os.PathLike) -> str:
    """How a data file is named in results: its absolute path."""
    return str(Path(path).resolve())


def row_info(file: str, index: int, row: MrcrRow) -> RowInfo:
    messages = json.loads(row.prompt)
    counts = count_tokens_batch([m["content"] for m in messages] + [row.answer])
    prompt_tokens = sum(counts[:-1])
    return RowInfo(
        file=file,
        row=index,
        messages=messages,
        answer=row.answer,
        random_string=row.random_string_to_prepend,
        n_needles=row.n_needles,
        prompt_tokens=prompt_tokens,
        total_tokens=prompt_tokens + counts[-1],
    )


def iter_row_infos(
    path: str | os.PathLike,
    *,
    needles: Iterable[int] | None = None,
    skip: Iterable[int] = (),
) -> Iterator[tuple[int, MrcrRow | None, RowInfo | None]]:
    """(index, row, info) for each row; rows filtered out by `needles` or listed in `skip` are
    yielded as (index, row, None) without the cost of tokenizing them."""
    wanted = set(needles) if needles else None
    skipped = set(skip)
    key = data_key(path)
    for index, row in enumerate(iter_rows(path)):
        if (wanted is not None and row.n_needles not in wanted) or index in skipped:
            yield index, row, None
        else:
            yield index, row, row_info(key, index, row)
