"""The one interface every benchmark form implements (`Recipe`), recipe-neutral.

The layers below name no recipe: they take what they need of one as an argument (`EvalRecipe` for
evaluation, `RowChecks` for the streaming validator). The recipes live in `mrcr_gen/recipes/`, and
`mrcr_gen.recipes.RECIPES` is the one registry the commands and the public API dispatch through.
"""

from __future__ import annotations

from typing import Protocol

from pydantic import BaseModel

from ._request import Generated, GenerateRequest, ProgressBar
from .eval._items import EvalRecipe


class Recipe(EvalRecipe, Protocol):
    """A benchmark form: how its files are recognised (`recognises`), read for evaluation
    (`read_items`), graded (`grade`, `grade_lenient`, `item_extras`), binned (`bin_label`) and
    reported (`report_extras`, `report_tables`), and the data shapes it exports (`schemas`)."""

    title: str  # for people: "openai/mrcr", "MRCR v2"

    def schemas(self) -> dict[str, type[BaseModel]]:
        """The Pydantic models of its data, by the stem of their file in `schemas/`."""
        ...

    def generate(self, request: GenerateRequest, progress: ProgressBar) -> Generated:
        """Write the dataset `request` asks for (`mrcr-gen`); RequestError when it cannot."""
        ...
