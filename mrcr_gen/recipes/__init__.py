"""Benchmark forms ("recipes"), each a package over the recipe-neutral core; they never import each
other. `RECIPES` is the one registry: every command and the public API dispatch through it, and a
third form is added by writing its package and naming its `RECIPE` here."""

from __future__ import annotations

import os

from .._paths import file_columns
from .._recipe import Recipe
from .mrcr_v2._recipe import RECIPE as MRCR_V2
from .openai_mrcr._recipe import RECIPE as OPENAI_MRCR

#: Every recipe, in the order files are offered to them (`Recipe.recognises`).
RECIPES: tuple[Recipe, ...] = (OPENAI_MRCR, MRCR_V2)


def recipe_named(name: str) -> Recipe:
    """The recipe called `name` (`--recipe`); ValueError naming the choices otherwise."""
    for recipe in RECIPES:
        if recipe.name == name:
            return recipe
    raise ValueError(f"unknown recipe {name!r}; choose {' or '.join(r.name for r in RECIPES)}")


def recipe_for_file(path: str | os.PathLike) -> Recipe | None:
    """The recipe whose files have this file's columns; None when it cannot be read or none does."""
    columns = file_columns(path)
    if columns is None:
        return None
    return next((recipe for recipe in RECIPES if recipe.recognises(columns)), None)


__all__ = ["MRCR_V2", "OPENAI_MRCR", "RECIPES", "Recipe", "recipe_for_file", "recipe_named"]
