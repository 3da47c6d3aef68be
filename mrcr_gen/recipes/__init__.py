"""Benchmark forms ("recipes"), each a package over the recipe-neutral core; they never import each
other. `RECIPES` is the one registry: every command and the public API dispatch through it, and a
third form is added by writing its package and naming its `RECIPE` here."""

from __future__ import annotations

import os
from collections.abc import Sequence

from .._paths import find_parquet_files
from .._recipe import Recipe
from .mrcr_v2._recipe import RECIPE as MRCR_V2
from .openai_mrcr._recipe import RECIPE as OPENAI_MRCR

#: Every recipe, in the order files are offered to them (`Recipe.recognises`, `Recipe.claims_file`).
RECIPES: tuple[Recipe, ...] = (OPENAI_MRCR, MRCR_V2)


def recipe_named(name: str) -> Recipe:
    """The recipe called `name` (`--recipe`); ValueError naming the choices otherwise."""
    for recipe in RECIPES:
        if recipe.name == name:
            return recipe
    raise ValueError(f"unknown recipe {name!r}; choose {' or '.join(r.name for r in RECIPES)}")


def recipe_claiming(path: str | os.PathLike) -> Recipe:
    """The recipe that claims the file (`Recipe.claims_file`), else the first one (whose checks then
    say what is wrong with it)."""
    return next((recipe for recipe in RECIPES if recipe.claims_file(path)), RECIPES[0])


def found_csv(path: str | os.PathLike) -> bool:
    """Whether a CSV file found in a folder is a recipe's (`Recipe.finds_csv`): other CSVs are left alone."""
    return any(recipe.finds_csv(path) for recipe in RECIPES)


def group_inputs(paths: Sequence[str | os.PathLike]) -> list[tuple[Recipe, list[str]]]:
    """The inputs by recipe, in registry order, recipes without inputs left out: files, directories
    (every *.parquet below, and every CSV a recipe finds there), globs and hf:// paths. A file no
    recipe claims, and an input that names nothing, go to the first recipe (its report says why)."""
    files, problems = find_parquet_files(paths, found_csv)
    groups: dict[str, list[str]] = {recipe.name: [] for recipe in RECIPES}
    for file in files:
        groups[recipe_claiming(file).name].append(str(file))
    groups[RECIPES[0].name] += [text for text, _ in problems]
    return [(recipe, groups[recipe.name]) for recipe in RECIPES if groups[recipe.name]]


__all__ = [
    "MRCR_V2",
    "OPENAI_MRCR",
    "RECIPES",
    "Recipe",
    "found_csv",
    "group_inputs",
    "recipe_claiming",
    "recipe_named",
]
