"""The one interface every benchmark form implements (`Recipe`), recipe-neutral, in parts.

Each part is declared beside the core that uses it, with a mixin of the defaults most recipes
share: files and ownership (`RecipeFiles`, here), generation (`mrcr_gen.generate.GenerationRecipe`),
checking (`mrcr_gen.validate.CheckingRecipe`), evaluation (`mrcr_gen.eval.EvalRecipe`). A recipe
subclasses `BaseRecipe` and declares only what is its own. The layers below name no recipe: they
take what they need of one as an argument. The recipes live in `mrcr_gen/recipes/` or in packages of
their own, and `mrcr_gen.recipes.RECIPES` is the one registry the commands and the public API
dispatch through.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel

from ._ownership import FileSignature
from .eval._items import EvalDefaults, EvalItem, EvalRecipe
from .generate import GenerationDefaults, GenerationRecipe
from .validate import CheckingDefaults, CheckingRecipe

if TYPE_CHECKING:
    from .pool._harvest import HarvestedPair


class RecipeFiles(Protocol):
    """Which files are the recipe's and what it keeps of them: its name, version and the column
    signatures of files made elsewhere (files `mrcr-gen` writes name their recipe themselves, see
    `mrcr_gen._ownership`), its data shapes and the writings a pool harvests from its files."""

    name: str  # `--recipe`, the `recipe` field of results and of generated files
    title: str  # for people: "openai/mrcr", "MRCR v2"
    version: str  # the recipe's own version, recorded in the files it generates
    signatures: tuple[FileSignature, ...]

    def schemas(self) -> dict[str, type[BaseModel]]:
        """The Pydantic models of its data, by the stem of their file in `schemas/`."""
        ...

    def harvest_rows(self, path: str | os.PathLike) -> Iterator[list[HarvestedPair | None]]:
        """`mrcr-gen pool harvest`: per row of one of its files, the (ask, writing) pairs it holds,
        each ask as a pool's `write a {format} about {entity}` (None for a pair that is not one);
        a one-line PoolError naming the file when it is not one of its files."""
        ...

    def writing_reference(self) -> dict[str, tuple[int, int, int]]:
        """Per format of its asks, the (median, p10, p90) tokens of the writings its benchmark was made
        of: what a pool's quality report sets its writings beside."""
        ...


class FilesDefaults:
    """The files part's defaults: version "1", no files made elsewhere, no schemas, nothing to harvest,
    no reference writings."""

    version: str = "1"
    signatures: tuple[FileSignature, ...] = ()
    name: str
    title: str

    def schemas(self) -> dict[str, type[BaseModel]]:
        return {}

    def harvest_rows(self, path: str | os.PathLike) -> Iterator[list[HarvestedPair | None]]:
        from .pool import PoolError

        raise PoolError(f"{path}: {self.title} files hold no writings a pool can harvest")

    def writing_reference(self) -> dict[str, tuple[int, int, int]]:
        return {}


class Recipe(RecipeFiles, GenerationRecipe, CheckingRecipe, EvalRecipe, Protocol):
    """A benchmark form as every command sees it: its files (`RecipeFiles`), generation
    (`GenerationRecipe`: its options, its job of files and row specs, its summary), validation
    (`CheckingRecipe`: its checking declaration, clean and fix),
    evaluation (`EvalRecipe`: reading, grading, the answer form, floors and report extras) and
    `mrcr-grade` (`grade_responses`, `grade_report`)."""

    def grade_responses(
        self,
        data: str | os.PathLike,
        responses: str | os.PathLike | dict[int, str],
        *,
        allow_missing: bool = False,
        cache: bool = True,
        items: dict[int, EvalItem] | None = None,
    ) -> dict[str, Any]:
        """`mrcr-grade` and `mrcr_gen.grade_responses`: the replies (RESPONSES.jsonl, or row ->
        reply) graded against DATA, with per-bin means (`rows`, `cells`, `mean`, `n_rows`,
        `missing`); RequestError naming what does not match. `cache` False (`--no-cache`): the
        rows' token counts neither read from nor added to the count cache (the sidecar's sealed
        counts are still used). `items`, when given, receives each graded row's item (row ->
        item), which the HTML page then shows without reading or counting the row again."""
        ...

    def grade_report(self, result: dict[str, Any]) -> tuple[list[str], list[Any]]:
        """What `mrcr-grade` prints of `result`: lines before the per-bin table, tables after it."""
        ...


class GradeDefaults:
    """`mrcr-grade` through the core: the replies graded with the recipe's `grade`, per-bin means,
    and a headline line."""

    def grade_responses(
        self,
        data: str | os.PathLike,
        responses: str | os.PathLike | dict[int, str],
        *,
        allow_missing: bool = False,
        cache: bool = True,
        items: dict[int, EvalItem] | None = None,
    ) -> dict[str, Any]:
        from ._errors import RequestError
        from .eval._items import FileError
        from .eval._responses import ResponsesError, grade_responses

        try:
            return grade_responses(
                data,
                responses,
                recipes=(self,),  # type: ignore[arg-type]
                allow_missing=allow_missing,
                cache=cache,
                items=items,
            )
        except (ResponsesError, FileError) as exc:
            raise RequestError(str(exc)) from None
        except (OSError, ValueError) as exc:
            raise RequestError(f"cannot read {data}: {exc}".splitlines()[0]) from None

    def grade_report(self, result: dict[str, Any]) -> tuple[list[str], list[Any]]:
        mean = "-" if result["mean"] is None else f"{result['mean']:.4f}"
        lines = [f"mean score {mean} over {result['n_rows']} rows"]
        if result["missing"]:
            lines.append(f"{len(result['missing'])} rows had no response and were not graded")
        return lines, []


class BaseRecipe(FilesDefaults, GenerationDefaults, CheckingDefaults, EvalDefaults, GradeDefaults):
    """What recipes usually share; a recipe subclasses it and declares what is its own."""
