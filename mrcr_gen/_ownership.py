"""Which recipe a data file belongs to, by declaration only.

A file `mrcr-gen` wrote names its recipe in the parquet footer's key-value metadata (key `mrcr_gen`,
a JSON object: `recipe`, `recipe_version`, `version`); that record decides. A file made elsewhere
(the official openai/mrcr parquet, MRCR v2's CSV or parquet) is claimed by the recipes whose declared
`FileSignature` it matches: its format and the columns that identify the form. A file nobody claims,
or that two recipes claim, is refused with one line: there is no claim by a missing column and no
fallback to a first recipe, so the order recipes are registered in never decides.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from ._errors import first_line

METADATA_KEY = b"mrcr_gen"


@dataclass(frozen=True)
class FileSignature:
    """Files made elsewhere that a recipe reads: of any of these formats ("parquet", "csv"), with
    every one of these columns."""

    columns: frozenset[str]
    formats: tuple[str, ...] = ("parquet",)

    def matches(self, file_format: str, columns: Sequence[str]) -> bool:
        return file_format in self.formats and self.columns <= set(columns)


class Claimant(Protocol):
    """What ownership needs of a recipe."""

    @property
    def name(self) -> str: ...

    @property
    def signatures(self) -> tuple[FileSignature, ...]: ...


R = TypeVar("R", bound=Claimant)


class UnclaimedFile(ValueError):
    """A readable file that no installed recipe claims, or that several do (one line for the user)."""


@dataclass(frozen=True)
class FileFacts:
    """What ownership reads of a file: its columns and the recipe record `mrcr-gen` left in it."""

    format: str  # "csv" for a *.csv file, else "parquet" (hf:// blobs in the Hub cache have no suffix)
    columns: list[str]
    tag: dict[str, Any] | None


def recipe_metadata(name: str, recipe_version: str) -> dict[bytes, bytes]:
    """The key-value metadata a generated parquet file carries: which recipe (and versions) made it."""
    from ._version import __version__

    record = {"recipe": name, "recipe_version": recipe_version, "version": __version__}
    return {METADATA_KEY: json.dumps(record, sort_keys=True).encode()}


def _tag(metadata: dict[bytes, bytes] | None) -> dict[str, Any] | None:
    try:
        record = json.loads((metadata or {})[METADATA_KEY])
    except (KeyError, ValueError):
        return None
    return record if isinstance(record, dict) and isinstance(record.get("recipe"), str) else None


def file_facts(path: str | os.PathLike) -> FileFacts | None:
    """The file's columns and recipe record; None when it cannot be read as CSV or parquet."""
    if Path(path).suffix.lower() == ".csv":
        from ._paths import file_columns

        columns = file_columns(path)
        return None if columns is None else FileFacts("csv", columns, None)
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
    except Exception:  # not parquet, unreadable, gone: the caller reports it its own way
        return None
    return FileFacts("parquet", list(schema.names), _tag(schema.metadata))


def read_recipe_tag(path: str | os.PathLike) -> dict[str, Any] | None:
    """The recipe record of a file `mrcr-gen` generated, else None."""
    facts = file_facts(path)
    return None if facts is None else facts.tag


def claimants(facts: FileFacts, recipes: Sequence[R]) -> list[R]:
    """The recipes that claim a file: the one its recorded recipe names, else those whose signature it matches."""
    if facts.tag is not None:
        return [recipe for recipe in recipes if recipe.name == facts.tag["recipe"]]
    return [recipe for recipe in recipes if any(s.matches(facts.format, facts.columns) for s in recipe.signatures)]


def owner(path: str | os.PathLike, facts: FileFacts, recipes: Sequence[R]) -> R:
    """The one recipe that claims the file; UnclaimedFile (one line) when none or several do."""
    found = claimants(facts, recipes)
    if len(found) == 1:
        return found[0]
    if len(found) > 1:
        names = " and ".join(recipe.name for recipe in found)
        raise UnclaimedFile(f"{path}: claimed by more than one recipe ({names}); it cannot be told which reads it")
    if facts.tag is not None:
        raise UnclaimedFile(
            f"{path}: a file of recipe {facts.tag['recipe']!r} (mrcr-gen {facts.tag.get('version', '?')}), which is "
            f"not installed; installed: {', '.join(recipe.name for recipe in recipes)}"
        )
    shown = ", ".join(facts.columns[:12]) + (", ..." if len(facts.columns) > 12 else "")
    raise UnclaimedFile(f"{path}: not a file of any known recipe: columns {shown or 'none'}")


def owner_of(path: str | os.PathLike, recipes: Sequence[R]) -> R | None:
    """The recipe that owns a file; None when the file cannot be read (`unreadable` says why);
    UnclaimedFile when it can but no recipe, or more than one, claims it."""
    facts = file_facts(path)
    return None if facts is None else owner(path, facts, recipes)


def unreadable(path: str | os.PathLike) -> str:
    """Why `file_facts` could not read a file, in one line and in the words of the library that tried."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if Path(path).suffix.lower() == ".csv":
        return f"{path}: cannot read as CSV"
    try:
        pq.read_schema(path)
    except (OSError, pa.ArrowException) as exc:
        return f"{path}: cannot read as parquet: {first_line(exc)}"
    return f"{path}: cannot read as parquet"


def found_by_signature(path: str | os.PathLike, recipes: Sequence[Claimant]) -> bool:
    """Whether a file found in a folder is some recipe's (other CSVs there are left alone)."""
    facts = file_facts(path)
    return facts is not None and bool(claimants(facts, recipes))
