"""The registry: every command finds a file's recipe through it, by the file's columns."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mrcr_gen._recipe import Recipe
from mrcr_gen.recipes import MRCR_V2, OPENAI_MRCR, RECIPES, group_inputs, recipe_claiming, recipe_named


def _parquet(path: Path, columns: list[str]) -> Path:
    pq.write_table(pa.table({name: ["x"] for name in columns}), path)
    return path


def _csv(path: Path, header: str) -> Path:
    path.write_text(header + "\n" + ",".join("x" for _ in header.split(",")) + "\n")
    return path


def test_the_registry_lists_each_recipe_once_by_name() -> None:
    assert [recipe.name for recipe in RECIPES] == ["openai-mrcr", "mrcr-v2"]
    assert recipe_named("mrcr-v2") is MRCR_V2 and recipe_named("openai-mrcr") is OPENAI_MRCR
    with pytest.raises(ValueError, match=r"unknown recipe 'v3'; choose openai-mrcr or mrcr-v2"):
        recipe_named("v3")


def test_each_schema_stem_belongs_to_one_recipe() -> None:
    stems = [stem for recipe in RECIPES for stem in recipe.schemas()]
    assert len(stems) == len(set(stems)) and "mrcr_row" in stems and "mrcr_v2_row" in stems


def test_files_are_claimed_by_their_columns(tmp_path: Path) -> None:
    assert recipe_claiming(_parquet(tmp_path / "a.parquet", ["prompt", "answer"])) is OPENAI_MRCR
    assert recipe_claiming(_parquet(tmp_path / "b.parquet", ["queries", "answer"])) is MRCR_V2
    # A file with both columns was always MRCR v2's; a CSV named on its own is v2's, so a broken
    # one gets v2's findings; what no recipe claims goes to the first, whose checks say why.
    assert recipe_claiming(_parquet(tmp_path / "c.parquet", ["prompt", "queries"])) is MRCR_V2
    assert recipe_claiming(_csv(tmp_path / "d.csv", "prompt,answer")) is MRCR_V2
    assert recipe_claiming(_parquet(tmp_path / "e.parquet", ["other"])) is OPENAI_MRCR
    (tmp_path / "f.parquet").write_bytes(b"not parquet")
    assert recipe_claiming(tmp_path / "f.parquet") is OPENAI_MRCR


def test_inputs_are_grouped_by_recipe_in_registry_order(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    v2_csv = _csv(folder / "v2.csv", "queries,answer,view_ops")
    _csv(folder / "notes.csv", "name,value")  # no recipe finds it: left out of a folder
    v2_parquet = _parquet(folder / "v2.parquet", ["queries", "answer"])
    openai = _parquet(folder / "o.parquet", ["prompt", "answer"])
    groups = group_inputs([str(folder), str(tmp_path / "missing.parquet")])
    assert [(recipe.name, sorted(inputs)) for recipe, inputs in groups] == [
        ("openai-mrcr", sorted([str(openai), str(tmp_path / "missing.parquet")])),
        ("mrcr-v2", sorted([str(v2_csv), str(v2_parquet)])),
    ]
    assert group_inputs([str(v2_csv)]) == [(MRCR_V2, [str(v2_csv)])]


def test_the_recipes_satisfy_the_protocol() -> None:
    members = [name for name in dir(Recipe) if not name.startswith("_")] + ["name", "title"]
    for recipe in RECIPES:
        assert all(hasattr(recipe, member) for member in members), recipe.name
