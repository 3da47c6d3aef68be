"""Reference floors, declared: what guessing scores on a row, as a recipe names and explains it.

A recipe lists its floors (`EvalRecipe.floors`, `Floor` each) and computes them per row
(`EvalRecipe.item_floors`: a value per declared name, recorded beside the score). The report's
columns and plot, the Inspect import and export and the memorization control (`_control`) read the
declaration: no neutral module knows a floor by its name. A recipe that declares none gets no
floor columns, and its rows in a `--control` run are counted as untested, with a note saying so.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Floor:
    """One reference floor of a recipe."""

    name: str  # the field of each result record holding the row's floor, e.g. "floor_random_needle"
    label: str  # the report table's column, e.g. "needle floor"
    title: str  # in sentences and the plot's legend, e.g. "random-needle floor"
    guess: str  # what the guessed reply adds to the prefix, e.g. "a random needle of the right ask"
    plotted: bool = False  # drawn dotted beside its needle count's line in plot.png
    control: bool = False  # the floor a `--control` run is tested against (`_control.memorization_test`)


class Declaring(Protocol):
    """What of a recipe (`EvalRecipe`) these helpers read: its declared floors."""

    @property
    def floors(self) -> tuple[Floor, ...]: ...


def declared_floors(recipes: Iterable[Declaring]) -> tuple[Floor, ...]:
    """The floors the recipes declare, each name once (the first declaration of it), in order."""
    found: dict[str, Floor] = {}
    for recipe in recipes:
        for floor in recipe.floors:
            found.setdefault(floor.name, floor)
    return tuple(found.values())


def floor_names(recipes: Iterable[Declaring]) -> tuple[str, ...]:
    return tuple(floor.name for floor in declared_floors(recipes))


def control_floor(recipe: Declaring) -> Floor | None:
    """The floor a control run of this recipe's rows is tested against; None when it declares none."""
    return next((floor for floor in recipe.floors if floor.control), None)


def control_floors(floors: Sequence[Floor]) -> tuple[Floor, ...]:
    return tuple(floor for floor in floors if floor.control)
