"""What the runner sends: recipe-neutral items, one per row, and the recipes that make and grade them.

A recipe (openai/mrcr here, MRCR v2 in its own package) contributes a reader that turns a data
file into `EvalItem`s and a grader for the replies. The runner knows nothing else about it.
Recipes are told apart by their columns: `prompt` => openai-mrcr, `queries` => mrcr-v2.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict

from .._bins import ABOVE_BINS, BELOW_BINS, BIN_UPPER_EDGES, BINS, bin_for_tokens


class ItemError(BaseModel):
    """Why a row cannot be evaluated: the validator's check name and its message."""

    model_config = ConfigDict(frozen=True)

    check: str
    message: str


class EvalItem(BaseModel):
    """One request to send and what grading its reply needs."""

    model_config = ConfigDict(frozen=True)

    source: str  # resolved path of the data file
    row: int  # index in that file
    digest: str  # sha256 over the row content the grade depends on
    messages: list[dict] = []
    answer: str = ""
    prefix: str = ""  # the random string / hash the grade needs
    n_needles: int = 0  # 0 when it cannot be told
    bin_upper: int = 0  # upper edge of the row's context bin (see `bin_label_of_upper`); 0 = unknown
    prompt_tokens: int = 0  # what --max-context-window compares
    total_tokens: int = 0  # prompt + answer: what decides the bin
    group: str | None = None  # rows sharing a transcript: sent one after another
    recipe: str = "openai-mrcr"
    error: ItemError | None = None

    @property
    def bin(self) -> str:
        if self.recipe == "mrcr-v2":  # its buckets: (4096, 8192] ... (4194304, 8388608]
            return f"({self.bin_upper // 2}, {self.bin_upper}]"
        return bin_label_of_upper(self.bin_upper)


BELOW_UPPER = BINS[0].lower - 1  # rows shorter than the first bin
ABOVE_UPPER = 2 * BINS[-1].upper  # rows longer than the last bin


def bin_upper_of_tokens(n_tokens: int) -> int:
    found = bin_for_tokens(n_tokens)
    if found is not None:
        return found.upper
    return BELOW_UPPER if n_tokens < BINS[0].lower else ABOVE_UPPER


UNKNOWN_BIN = "unknown"  # a row that could not be read far enough to count its tokens


def bin_label_of_upper(upper: int) -> str:
    if upper <= 0:
        return UNKNOWN_BIN
    if upper in BIN_UPPER_EDGES:
        return BINS[BIN_UPPER_EDGES.index(upper)].label
    return BELOW_BINS if upper < BINS[0].lower else ABOVE_BINS


class FileError(ValueError):
    """A data file that cannot be read (or stops being readable half-way): one line naming it."""


@dataclass(frozen=True)
class Recipe:
    """A benchmark form as the runner sees it."""

    name: str
    marker_column: str  # a file with this column belongs to the recipe
    # read(path, *, tokenizer_spec, skip) -> items in row order; skip(row, digest) true means the
    # runner already has that row: yield a bare item (source, row, digest) without parsing it.
    read: Callable[..., Iterator[EvalItem]]
    grade: Callable[[str, EvalItem], float]  # the official score of a reply
    grade_lenient: Callable[[str, EvalItem], float] | None = None  # diagnostic, never the headline
    # Optional extras recorded beside the score (e.g. reference floors); {} when none.
    extras: Callable[[EvalItem], dict] = field(default=lambda item: {})


RECIPES: dict[str, Recipe] = {}


def register_recipe(recipe: Recipe) -> None:
    RECIPES[recipe.name] = recipe


def recipe_for_columns(names: list[str], path: str | os.PathLike) -> Recipe:
    """The recipe whose marker column the file has; FileError when none is known."""
    for recipe in RECIPES.values():
        if recipe.marker_column in names:
            return recipe
    if "queries" in names:
        raise FileError(f"{path}: MRCR v2 files (column 'queries') need the mrcr-v2 recipe, which is not installed")
    raise FileError(f"{path}: not an MRCR file: no 'prompt' column (columns: {', '.join(names) or 'none'})")


def read_items(
    path: str | os.PathLike,
    *,
    tokenizer_spec: str = "o200k_base",
    skip: Callable[[int, str], bool] | None = None,
) -> Iterator[EvalItem]:
    """The items of one data file, whatever its recipe; FileError for an unreadable file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..recipes.mrcr_v2 import _eval  # noqa: F401 - registers mrcr-v2
    from ..recipes.openai_mrcr import _eval as _mrcr  # noqa: F401 - registers openai-mrcr

    if str(path).lower().endswith(".csv"):  # MRCR v2's upstream layout
        from ..recipes.mrcr_v2._rows import file_columns

        names = file_columns(path)
        if names is None:
            raise FileError(f"{path}: cannot read as CSV")
        yield from recipe_for_columns(names, path).read(path, tokenizer_spec=tokenizer_spec, skip=skip)
        return
    try:
        names = pq.read_schema(path).names
    except (OSError, pa.ArrowException) as exc:
        raise FileError(f"{path}: cannot read as parquet: {_first_line(exc)}") from None
    yield from recipe_for_columns(names, path).read(path, tokenizer_spec=tokenizer_spec, skip=skip)


def grade_item(response: str, item: EvalItem) -> float:
    return RECIPES[item.recipe].grade(response, item)


def grade_item_lenient(response: str, item: EvalItem) -> float | None:
    lenient = RECIPES[item.recipe].grade_lenient
    return None if lenient is None else lenient(response, item)


def item_extras(item: EvalItem) -> dict:
    return RECIPES[item.recipe].extras(item)


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__
