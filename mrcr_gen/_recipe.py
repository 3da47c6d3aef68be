"""The one interface every benchmark form implements (`Recipe`), recipe-neutral.

The layers below name no recipe: they take what they need of one as an argument (`EvalRecipe` for
evaluation, `RowChecks` for the streaming validator). The recipes live in `mrcr_gen/recipes/`, and
`mrcr_gen.recipes.RECIPES` is the one registry the commands and the public API dispatch through.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel

from ._request import Generated, GenerateRequest, ProgressBar, ValidateRequest
from .eval._items import EvalRecipe
from .validate import RepairResult

if TYPE_CHECKING:
    from .pool._harvest import HarvestedPair


class Recipe(EvalRecipe, Protocol):
    """A benchmark form as every command sees it: which files are its own (`finds_csv`,
    `claims_file`, `recognises`), generation (`generate`), validation (`validate`,
    `repair_refusal`), the writings a pool harvests from its files (`harvest_rows`), evaluation
    (`read_items`, `grade`, `grade_lenient`, `item_extras`, `bin_label`), `mrcr-grade`
    (`grade_responses`, `grade_report`), its report's extras (`report_extras`, `report_tables`)
    and the data shapes it exports (`schemas`)."""

    title: str  # for people: "openai/mrcr", "MRCR v2"

    def schemas(self) -> dict[str, type[BaseModel]]:
        """The Pydantic models of its data, by the stem of their file in `schemas/`."""
        ...

    def generate(self, request: GenerateRequest, progress: ProgressBar) -> Generated:
        """Write the dataset `request` asks for (`mrcr-gen`); RequestError when it cannot."""
        ...

    def finds_csv(self, path: str | os.PathLike) -> bool:
        """Whether a CSV file found in a folder is one of this recipe's."""
        ...

    def claims_file(self, path: str | os.PathLike) -> bool:
        """Whether a file (named, or found in a folder) is one of this recipe's."""
        ...

    def repair_refusal(self, mode: str) -> str | None:
        """Why `mode` ("clean" or "fix") does not apply to its files, or None when it does."""
        ...

    def harvest_rows(self, path: str | os.PathLike) -> Iterator[list[HarvestedPair | None]]:
        """`mrcr-gen pool harvest`: per row of one of its files, the (ask, writing) pairs it holds,
        each ask as a pool's `write a {format} about {entity}` (None for a pair that is not one);
        a one-line PoolError naming the file when it is not one of its files."""
        ...

    def grade_responses(
        self, data: str | os.PathLike, responses: str | os.PathLike, *, allow_missing: bool = False
    ) -> dict[str, Any]:
        """`mrcr-grade`: the replies of RESPONSES.jsonl graded against DATA, with per-bin means
        (`rows`, `cells`, `mean`, `n_rows`, `missing`); RequestError naming what does not match."""
        ...

    def grade_report(self, result: dict[str, Any]) -> tuple[list[str], list[Any]]:
        """What `mrcr-grade` prints of `result`: lines before the per-bin table, tables after it."""
        ...

    def validate(self, inputs: Sequence[str], request: ValidateRequest) -> RepairResult:
        """Check its files (`mrcr-validate`) and, with mode clean or fix, write the rows kept to
        `request.out`; `inputs` may name what is not a file (its report then says so)."""
        ...
