"""Benchmark forms ("recipes"), each a package over the recipe-neutral core; they never import each
other. `RECIPES` (or `registry()`) is the one registry every command and the public API dispatch
through: the recipes installed under the entry-point group `mrcr_gen.recipes` (mrcr-gen registers
its own two there), so a recipe can live in a package of its own. It is loaded on first use."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from .._ownership import UnclaimedFile, found_by_signature, owner_of, unreadable
from .._paths import find_parquet_files
from .._recipe import Recipe

ENTRY_POINT_GROUP = "mrcr_gen.recipes"
#: mrcr-gen's own recipes, first in the registry; also loaded from here when mrcr-gen runs from a
#: source tree that was never installed (no entry-point metadata).
BUILT_IN = {
    "openai-mrcr": "mrcr_gen.recipes.openai_mrcr._recipe:RECIPE",
    "mrcr-v2": "mrcr_gen.recipes.mrcr_v2._recipe:RECIPE",
}


def _warn(message: str) -> None:
    print(f"mrcr-gen: warning: {message}", file=sys.stderr)


def load_recipes() -> tuple[Recipe, ...]:
    """The installed recipes: built-ins first, then plugins by entry-point name. A plugin that fails
    to load, reuses a recipe's name or lacks a member of the `Recipe` protocol is left out with a
    one-line warning (the others still work)."""
    from importlib.metadata import EntryPoint, entry_points

    declared = {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}
    for key, value in BUILT_IN.items():
        declared.setdefault(key, EntryPoint(key, value, ENTRY_POINT_GROUP))
    order = [*BUILT_IN, *sorted(set(declared) - set(BUILT_IN))]
    found: dict[str, Recipe] = {}
    for key in order:
        entry = declared[key]
        try:
            recipe = entry.load()
        except Exception as exc:  # a broken plugin must not break every command
            _warn(f"recipe plugin {key!r} ({entry.value}) failed to load: {type(exc).__name__}: {exc}")
            continue
        name: object = getattr(recipe, "name", None)
        if not isinstance(name, str) or name in found:
            _warn(f"recipe plugin {key!r} ({entry.value}) left out: its name {name!r} is missing or taken")
            continue
        missing = missing_members(recipe)
        if missing:
            _warn(
                f"recipe plugin {key!r} ({entry.value}) left out: it lacks {', '.join(missing)} (subclass BaseRecipe)"
            )
            continue
        found[name] = recipe
    return tuple(found.values())


def missing_members(recipe: object) -> list[str]:
    """The members of the `Recipe` protocol that `recipe` lacks."""
    members = {name for name in dir(Recipe) if not name.startswith("_")}
    for part in Recipe.__mro__:
        members.update(name for name in getattr(part, "__annotations__", {}) if not name.startswith("_"))
    return sorted(name for name in members if not hasattr(recipe, name))


_loaded: tuple[Recipe, ...] | None = None


def registry() -> tuple[Recipe, ...]:
    """Every installed recipe, built-ins first, loaded on first use: a plugin may import mrcr_gen
    before mrcr_gen looks for it (its entry point then finds it complete)."""
    global _loaded
    if _loaded is None:
        _loaded = load_recipes()
    return _loaded


def __getattr__(name: str) -> tuple[Recipe, ...]:
    if name == "RECIPES":  # `from mrcr_gen.recipes import RECIPES`: the registry, loaded on first use
        return registry()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


RECIPES: tuple[Recipe, ...]  # see `__getattr__`


def recipe_named(name: str) -> Recipe:
    """The recipe called `name` (`--recipe`); ValueError naming the choices otherwise."""
    for recipe in registry():
        if recipe.name == name:
            return recipe
    raise ValueError(f"unknown recipe {name!r}; choose {', '.join(r.name for r in registry())}")


def recipe_claiming(path: str | os.PathLike) -> Recipe:
    """The recipe that owns the file (see `mrcr_gen._ownership`); UnclaimedFile, one line, when it
    cannot be read or no recipe, or more than one, claims it."""
    recipe = owner_of(path, registry())
    if recipe is None:
        raise UnclaimedFile(unreadable(path))
    return recipe


def found_csv(path: str | os.PathLike) -> bool:
    """Whether a CSV file found in a folder is a recipe's (by its signature): other CSVs are left alone."""
    return found_by_signature(path, registry())


def group_inputs(paths: Sequence[str | os.PathLike]) -> list[tuple[Recipe, list[str]]]:
    """The inputs by recipe, in registry order, recipes without inputs left out: files, directories
    (every *.parquet below, and every CSV a recipe claims there), globs and hf:// paths.
    UnclaimedFile for a readable file no recipe (or more than one) claims. An input that names
    nothing, and a file that cannot be read, go to the first recipe, whose report says why."""
    files, problems = find_parquet_files(paths, found_csv)
    groups: dict[str, list[str]] = {recipe.name: [] for recipe in registry()}
    unread: list[str] = []
    for file in files:
        recipe = owner_of(file, registry())
        (groups[recipe.name] if recipe is not None else unread).append(str(file))
    groups[registry()[0].name] += unread + [text for text, _ in problems]
    return [(recipe, groups[recipe.name]) for recipe in registry() if groups[recipe.name]]


__all__ = [
    "ENTRY_POINT_GROUP",
    "RECIPES",
    "Recipe",
    "UnclaimedFile",
    "found_csv",
    "group_inputs",
    "load_recipes",
    "recipe_claiming",
    "recipe_named",
    "registry",
]
