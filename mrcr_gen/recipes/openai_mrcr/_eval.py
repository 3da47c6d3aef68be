"""The openai/mrcr recipe for the runner: its rows are chat rows (`mrcr_gen.eval._chat`), with the
needle count told by the final query when the `n_needles` column cannot."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

from ..._counts import RowCounts
from ...eval._chat import ChatRows, read_chat_items, row_digest
from ...eval._items import EvalItem
from ._floors import needle_indices

RECIPE = "openai-mrcr"


def count_needles(messages: list[dict]) -> int:
    return len(needle_indices(messages))


ROWS = ChatRows(RECIPE, count_needles)


def read_mrcr_items(
    path: str | os.PathLike,
    *,
    tokenizer_spec: str = "o200k_base",
    skip: Callable[[int, str], bool] | None = None,
    counts: RowCounts | None = None,
) -> Iterator[EvalItem]:
    """The items of an openai/mrcr parquet file in row order (see `read_chat_items`)."""
    return read_chat_items(ROWS, path, tokenizer_spec=tokenizer_spec, skip=skip, counts=counts)


__all__ = ["RECIPE", "ROWS", "read_mrcr_items", "row_digest"]
