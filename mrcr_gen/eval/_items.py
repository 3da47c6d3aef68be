"""What the runner sends: recipe-neutral items, one per row, and the recipes that make and grade them.

A recipe (`EvalRecipe`) contributes a reader that turns a data file into `EvalItem`s, a grader
for the replies, the form of its answers (`answer_form`, for the failure analysis), its declared
reference floors (`floors`, `item_floors`) and its report's extras; the runner knows nothing else
about it. `EvalDefaults` supplies what recipes usually share. Which recipe owns a file is told by
the file (see `mrcr_gen._ownership`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict

from .._bins import ABOVE_BINS, BELOW_BINS, BIN_UPPER_EDGES, BINS, bin_for_tokens
from .._counts import RowCounts
from .._ownership import FileSignature, UnclaimedFile, file_facts, owner, unreadable
from ._analysis import SplitReply, Transcript, split_prefix
from ._floors import Floor


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
    recipe: str  # the name of the recipe that read it
    error: ItemError | None = None


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


class AnswerForm(Protocol):
    """How a recipe's model answers: what the failure analysis reads as the reply's prefix and its
    body. A recipe whose model answers otherwise than prefix + writing (say a JSON object
    `{"prefix": ..., "text": ...}`) supplies an object with a `split` of its own."""

    def split(self, reply: str, item: EvalItem) -> SplitReply:
        """The reply's prefix state and its body, for the row `item`."""
        ...


class PrefixedAnswer:
    """The MRCR answer form: the row's prefix (`EvalItem.prefix`) glued to the front of the writing."""

    def split(self, reply: str, item: EvalItem) -> SplitReply:
        return split_prefix(reply, item.prefix)


PREFIXED = PrefixedAnswer()


class FileError(ValueError):
    """A data file that cannot be read (or stops being readable half-way): one line naming it."""


class EvalRecipe(Protocol):
    """What the runner, `mrcr-grade` and the reports need of a benchmark form (a part of
    `mrcr_gen.Recipe`); the recipes in `mrcr_gen.recipes.RECIPES` provide it."""

    name: str  # the `recipe` of items and result records
    signatures: tuple[FileSignature, ...]  # which files made elsewhere it reads (see `mrcr_gen._ownership`)
    answer_form: AnswerForm  # how a reply splits into its prefix and its body (the failure analysis)
    floors: tuple[Floor, ...]  # its reference floors, as `item_floors` records them and reports show them

    def read_items(
        self,
        path: str | os.PathLike,
        *,
        tokenizer_spec: str,
        skip: Callable[[int, str], bool] | None,
        counts: RowCounts | None,
    ) -> Iterator[EvalItem]:
        """Items in row order; `skip(row, digest)` true yields a bare item (source, row, digest).
        `counts` (see `mrcr_gen._counts`): take a row's token counts from it where it has them
        (`get(row, digest)`), and `put` those counted, so that a row is counted once in its life."""
        ...

    def grade(self, response: str, item: EvalItem) -> float:
        """The official score of a reply."""
        ...

    def grade_lenient(self, response: str, item: EvalItem) -> float | None:
        """A diagnostic score, never the headline; None when the recipe has none."""
        ...

    def transcript(self, item: EvalItem) -> Transcript | None:
        """The row as the per-row failure analysis reads it; None when it cannot be read."""
        ...

    def item_floors(self, item: EvalItem) -> dict[str, float | None]:
        """The row's reference floors, by the names `floors` declares; {} when it cannot tell them."""
        ...

    def item_extras(self, item: EvalItem) -> dict[str, Any]:
        """Other fields recorded beside the score (after the floors); {} when none."""
        ...

    def query_only_messages(self, item: EvalItem) -> list[dict]:
        """What `--control query-only` sends of the row: its final query without the conversation."""
        ...

    def bin_label(self, upper: int) -> str:
        """The label of the length bin with this upper edge."""
        ...

    def bin_uppers(self) -> tuple[int, ...]:
        """The upper edges of its length bins (what `mrcr-eval --bin` takes)."""
        ...

    def report_extras(self, records: list[dict[str, Any]], max_context_window: int | None) -> dict[str, Any]:
        """Summary entries of this recipe's own; {} when none. `records` are its rows, errors and
        skipped rows (status "skipped": over the context window) with score 0: its own headline
        mean leaves skipped rows out, as `mean_score` does; its per-length means count them 0."""
        ...

    def report_tables(self, summary: dict[str, Any]) -> list[Any]:
        """Rich renderables `mrcr-eval report` prints after the common table, from its extras."""
        ...


def row_extras(recipe: EvalRecipe, item: EvalItem) -> dict[str, Any]:
    """What a record of `item` holds beside its score: the recipe's floors, then its other extras."""
    return recipe.item_floors(item) | recipe.item_extras(item)


class EvalDefaults:
    """What an `EvalRecipe` usually shares, for a recipe class to inherit: no lenient grade, no
    failure analysis, no floors, no extras, no report of its own, the MRCR answer form (prefix +
    writing), openai/mrcr's length bins and a query-only control that sends the final message."""

    answer_form: AnswerForm = PREFIXED
    floors: tuple[Floor, ...] = ()

    def grade_lenient(self, response: str, item: EvalItem) -> float | None:
        return None

    def transcript(self, item: EvalItem) -> Transcript | None:
        return None

    def item_floors(self, item: EvalItem) -> dict[str, float | None]:
        return {}

    def item_extras(self, item: EvalItem) -> dict[str, Any]:
        return {}

    def query_only_messages(self, item: EvalItem) -> list[dict]:
        return item.messages[-1:]

    def bin_label(self, upper: int) -> str:
        return bin_label_of_upper(upper)

    def bin_uppers(self) -> tuple[int, ...]:
        return BIN_UPPER_EDGES

    def report_extras(self, records: list[dict[str, Any]], max_context_window: int | None) -> dict[str, Any]:
        return {}

    def report_tables(self, summary: dict[str, Any]) -> list[Any]:
        return []


R = TypeVar("R", bound=EvalRecipe)


def recipe_for_file(path: str | os.PathLike, recipes: Sequence[R]) -> R:
    """The recipe (of `recipes`) that owns the file (see `mrcr_gen._ownership`); FileError, one
    line, for a file that cannot be read or that no recipe, or more than one, claims."""
    facts = file_facts(path)
    if facts is None:
        raise FileError(unreadable(path))
    try:
        return owner(path, facts, recipes)
    except UnclaimedFile as exc:
        raise FileError(str(exc)) from None


def recipe_named(name: str, recipes: Sequence[EvalRecipe]) -> EvalRecipe:
    for recipe in recipes:
        if recipe.name == name:
            return recipe
    raise KeyError(f"no recipe {name!r} among {', '.join(r.name for r in recipes)}")


def read_items(
    path: str | os.PathLike,
    *,
    recipes: Sequence[EvalRecipe],
    tokenizer_spec: str = "o200k_base",
    skip: Callable[[int, str], bool] | None = None,
    cache: bool = True,
    data_sha256: str | None = None,
) -> Iterator[EvalItem]:
    """The items of one data file, read by the recipe (of `recipes`) that owns it; FileError for an
    unreadable file or one no recipe claims. Token counts come from the file's sidecar where it
    vouches for them (`data_sha256`: the file's, when the caller has it), else from the count
    cache unless `cache` is False (`--no-cache`), else are counted (and cached)."""
    recipe = recipe_for_file(path, recipes)
    if not takes_keyword(recipe.read_items, "counts"):  # a plugin's reader made before `counts`: it counts itself
        yield from recipe.read_items(path, tokenizer_spec=tokenizer_spec, skip=skip)  # type: ignore[call-arg]
        return
    counts = RowCounts(path, tokenizer_spec, data_sha256=data_sha256, cache=cache)
    yield from recipe.read_items(path, tokenizer_spec=tokenizer_spec, skip=skip, counts=counts)


def takes_keyword(function: Callable[..., Any], name: str) -> bool:
    """Whether `function` takes the keyword argument `name` (a plugin's method may predate it)."""
    import inspect

    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return False
    return name in parameters or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
