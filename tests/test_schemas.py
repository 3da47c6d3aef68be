from pathlib import Path

from mrcr_gen._schemas import export_schemas, schema_documents, stale_schemas
from mrcr_gen.recipes import RECIPES

SCHEMAS = Path(__file__).resolve().parents[1] / "schemas"


def test_schemas_directory_matches_the_models():
    stale = stale_schemas(SCHEMAS, RECIPES)
    assert not stale, f"schemas/ is out of date ({stale}); run: mrcr-gen schemas"


def test_a_changed_schema_is_detected(tmp_path):
    export_schemas(tmp_path, RECIPES)
    assert stale_schemas(tmp_path, RECIPES) == []
    (tmp_path / "mrcr_row.schema.json").write_text("{}")
    (tmp_path / "old.schema.json").write_text("{}")
    assert stale_schemas(tmp_path, RECIPES) == ["mrcr_row.schema.json", "old.schema.json"]
    export_schemas(tmp_path, RECIPES)
    assert stale_schemas(tmp_path, RECIPES) == []


def test_row_schema_has_exactly_the_real_columns():
    import json

    schema = json.loads(schema_documents(RECIPES)["mrcr_row.schema.json"])
    assert list(schema["properties"]) == [
        "prompt", "answer", "random_string_to_prepend", "n_needles",
        "desired_msg_index", "total_messages", "n_chars", "date_added",
    ]
