"""The registry and file ownership: recipes come from the entry-point group `mrcr_gen.recipes`,
and a file belongs to the recipe it names (files mrcr-gen wrote) or whose declared signature it
matches (files made elsewhere); never to a recipe by a missing column or by registry order."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrcr_gen._ownership import (
    METADATA_KEY,
    FileFacts,
    FileSignature,
    UnclaimedFile,
    claimants,
    owner,
    read_recipe_tag,
    recipe_metadata,
)
from mrcr_gen._recipe import BaseRecipe, Recipe
from mrcr_gen._version import __version__
from mrcr_gen.recipes import RECIPES, group_inputs, load_recipes, recipe_claiming, recipe_named

OPENAI_MRCR, MRCR_V2 = recipe_named("openai-mrcr"), recipe_named("mrcr-v2")
OFFICIAL_OPENAI = [
    "prompt",
    "answer",
    "random_string_to_prepend",
    "n_needles",
    "desired_msg_index",
    "total_messages",
    "n_chars",
    "date_added",
]
OFFICIAL_V2 = ["queries", "answer", "context_len", "answer_token_count", "view_ops", "num_relevant"]


def _parquet(path: Path, columns: list[str], metadata: dict[bytes, bytes] | None = None) -> Path:
    table = pa.table({name: ["x"] for name in columns})
    pq.write_table(table.replace_schema_metadata(metadata), path)
    return path


def _csv(path: Path, header: str) -> Path:
    path.write_text(header + "\n" + ",".join("x" for _ in header.split(",")) + "\n")
    return path


def test_the_registry_lists_the_built_ins_first_once_by_name() -> None:
    names = [recipe.name for recipe in RECIPES]
    assert names[:2] == ["openai-mrcr", "mrcr-v2"] and len(names) == len(set(names))
    with pytest.raises(ValueError, match=r"unknown recipe 'v3'; choose openai-mrcr, mrcr-v2"):
        recipe_named("v3")


def test_the_built_ins_are_registered_through_the_entry_point() -> None:
    from importlib.metadata import entry_points

    declared = {ep.name: ep.value for ep in entry_points(group="mrcr_gen.recipes")}
    assert declared["openai-mrcr"] == "mrcr_gen.recipes.openai_mrcr._recipe:RECIPE"
    assert declared["mrcr-v2"] == "mrcr_gen.recipes.mrcr_v2._recipe:RECIPE"


class _HalfARecipe:
    name = title = "half"  # no grader, no reader, ...: left out of the registry


HALF_A_RECIPE = _HalfARecipe()


def test_a_broken_or_duplicate_plugin_is_left_out_with_a_warning(monkeypatch, capsys) -> None:
    from importlib import metadata

    real = metadata.entry_points

    def entry_points(group: str):
        extra = [
            metadata.EntryPoint("broken", "mrcr_gen_no_such_module:RECIPE", group),
            metadata.EntryPoint("again", "mrcr_gen.recipes.mrcr_v2._recipe:RECIPE", group),
            metadata.EntryPoint("half", "tests.test_recipes:HALF_A_RECIPE", group),
        ]
        return [*real(group=group), *extra]

    monkeypatch.setattr(metadata, "entry_points", entry_points)
    names = [recipe.name for recipe in load_recipes()]
    assert names.count("mrcr-v2") == 1 and "broken" not in names
    err = capsys.readouterr().err.splitlines()
    assert any(line.startswith("mrcr-gen: warning: recipe plugin 'broken'") for line in err)
    assert any("recipe plugin 'again'" in line and "'mrcr-v2' is missing or taken" in line for line in err)
    assert "half" not in names and any("recipe plugin 'half'" in line and "it lacks " in line for line in err)


def test_each_schema_stem_belongs_to_one_recipe() -> None:
    stems = [stem for recipe in RECIPES for stem in recipe.schemas()]
    assert len(stems) == len(set(stems)) and "mrcr_row" in stems and "mrcr_v2_row" in stems


def test_official_files_are_claimed_as_before(tmp_path: Path) -> None:
    # A Hub download is a blob named by its hash, with no suffix: parquet, as before.
    assert recipe_claiming(_parquet(tmp_path / "b3ee754031f6", OFFICIAL_OPENAI)) is OPENAI_MRCR
    assert recipe_claiming(_parquet(tmp_path / "a.parquet", OFFICIAL_OPENAI)) is OPENAI_MRCR
    assert recipe_claiming(_parquet(tmp_path / "b.parquet", OFFICIAL_V2)) is MRCR_V2
    assert recipe_claiming(_csv(tmp_path / "c.csv", ",".join(OFFICIAL_V2))) is MRCR_V2
    # Before its `date_added` fix, openai/mrcr had no such column: still openai/mrcr's.
    assert recipe_claiming(_parquet(tmp_path / "d.parquet", OFFICIAL_OPENAI[:-1])) is OPENAI_MRCR


@pytest.mark.parametrize(
    ("name", "columns", "message"),
    [
        ("other.parquet", ["a", "b"], "not a file of any known recipe: columns a, b"),
        ("prompt-only.parquet", ["prompt", "response"], "not a file of any known recipe: columns prompt, response"),
        ("openai.csv", OFFICIAL_OPENAI, "not a file of any known recipe: columns prompt, answer"),
        ("both.parquet", [*OFFICIAL_OPENAI, "queries"], "claimed by more than one recipe (openai-mrcr and mrcr-v2)"),
    ],
)
def test_files_no_recipe_or_two_recipes_claim_are_refused_in_one_line(tmp_path: Path, name, columns, message) -> None:
    path = tmp_path / name
    _csv(path, ",".join(columns)) if name.endswith(".csv") else _parquet(path, columns)
    with pytest.raises(UnclaimedFile) as error:
        recipe_claiming(path)
    assert message in str(error.value) and str(error.value).startswith(str(path)) and "\n" not in str(error.value)


def test_an_unreadable_file_is_refused_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "f.parquet").write_bytes(b"not parquet")
    with pytest.raises(UnclaimedFile, match=r"f\.parquet: cannot read as parquet: "):
        recipe_claiming(tmp_path / "f.parquet")


def test_a_generated_file_names_its_recipe_and_that_decides(tmp_path: Path) -> None:
    metadata = recipe_metadata("mrcr-v2", "1")
    assert json.loads(metadata[METADATA_KEY]) == {"recipe": "mrcr-v2", "recipe_version": "1", "version": __version__}
    # openai/mrcr's columns, but the file says it is MRCR v2's: the record wins over the signature.
    path = _parquet(tmp_path / "tagged.parquet", OFFICIAL_OPENAI, metadata)
    assert read_recipe_tag(path) == json.loads(metadata[METADATA_KEY])
    assert recipe_claiming(path) is MRCR_V2
    missing = _parquet(tmp_path / "plugin.parquet", OFFICIAL_OPENAI, recipe_metadata("mrcr-elsewhere", "3"))
    with pytest.raises(UnclaimedFile, match=r"a file of recipe 'mrcr-elsewhere' \(mrcr-gen .*\), which is not inst"):
        recipe_claiming(missing)


class _Declared(BaseRecipe):
    def __init__(self, name: str, signatures: tuple[FileSignature, ...]) -> None:
        self.name, self.title, self.signatures = name, name, signatures


COLUMNS = st.lists(st.sampled_from(["prompt", "answer", "queries", "random_string_to_prepend", "x", "y"]), unique=True)


@given(columns=COLUMNS, file_format=st.sampled_from(["parquet", "csv"]), reverse=st.booleans())
def test_ownership_never_depends_on_registry_order(columns, file_format, reverse) -> None:
    """Whatever the columns: the claimants are the recipes whose signature matches, the same set in
    any registry order, and `owner` answers only when exactly one claims the file."""
    recipes = [recipe for recipe in RECIPES if recipe.name in ("openai-mrcr", "mrcr-v2")]
    recipes.append(_Declared("prompt-answer", (FileSignature(frozenset({"prompt", "answer"}), ("parquet",)),)))
    ordered = recipes[::-1] if reverse else recipes
    facts = FileFacts(file_format, columns, None)
    found = {recipe.name for recipe in claimants(facts, ordered)}
    assert found == {r.name for r in recipes if any(s.matches(file_format, columns) for s in r.signatures)}
    if len(found) == 1:
        assert owner("f", facts, ordered).name == found.pop()
    else:
        with pytest.raises(UnclaimedFile):
            owner("f", facts, ordered)


def test_inputs_are_grouped_by_recipe_in_registry_order(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    v2_csv = _csv(folder / "v2.csv", "queries,answer,view_ops")
    _csv(folder / "notes.csv", "name,value")  # no recipe claims it: left out of a folder
    v2_parquet = _parquet(folder / "v2.parquet", ["queries", "answer"])
    openai = _parquet(folder / "o.parquet", OFFICIAL_OPENAI)
    groups = group_inputs([str(folder), str(tmp_path / "missing.parquet")])
    assert [(recipe.name, sorted(inputs)) for recipe, inputs in groups] == [
        ("openai-mrcr", sorted([str(openai), str(tmp_path / "missing.parquet")])),
        ("mrcr-v2", sorted([str(v2_csv), str(v2_parquet)])),
    ]
    assert group_inputs([str(v2_csv)]) == [(MRCR_V2, [str(v2_csv)])]
    _parquet(folder / "unrelated.parquet", ["a"])  # a parquet in a data folder is an input: refused
    with pytest.raises(UnclaimedFile, match=r"unrelated\.parquet: not a file of any known recipe: columns a"):
        group_inputs([str(folder)])


def test_the_recipes_satisfy_the_protocol() -> None:
    members = [name for name in dir(Recipe) if not name.startswith("_")] + ["name", "title", "version", "signatures"]
    for recipe in RECIPES:
        assert all(hasattr(recipe, member) for member in members), recipe.name
        # a plugin that reads only the files it generates (mrcr-json) declares no signature
        assert isinstance(recipe.version, str) and isinstance(recipe.signatures, tuple)
    assert all(recipe_named(name).signatures for name in ("openai-mrcr", "mrcr-v2"))


@pytest.mark.parametrize("name", ["openai-mrcr", "mrcr-v2"])
def test_the_docs_tables_list_every_built_in_recipe(name: str) -> None:
    """The Inspect page's task table has a row per registered built-in recipe, named as the registry names it."""
    from mrcr_gen.inspect._import import inspect_task_name

    docs = Path(__file__).resolve().parents[1] / "docs"
    tasks = [line.split("|")[1].strip() for line in (docs / "inspect.md").read_text().splitlines()
             if line.startswith("| `mrcr_gen/")]
    assert f"`mrcr_gen/{inspect_task_name(recipe_named(name))}`" in tasks
    assert len(tasks) == len({"openai-mrcr", "mrcr-v2"})


def test_a_plugin_imported_before_mrcr_gen_is_registered() -> None:
    """The registry loads on first use, so a plugin that imports mrcr_gen itself is found complete."""
    import subprocess
    import sys

    code = "import mrcr_json\nfrom mrcr_gen.recipes import RECIPES\nprint(','.join(r.name for r in RECIPES))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout.split() == ["openai-mrcr,mrcr-v2,mrcr-json"]
