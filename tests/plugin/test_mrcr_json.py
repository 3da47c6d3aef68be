"""The mrcr-json recipe's own pieces: rows built from a spec, the grade, the answer form, the
checks and the fixer, and the eval reader."""

from __future__ import annotations

import json
from difflib import SequenceMatcher
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mrcr_json._answers import grade, parse, transcript
from mrcr_json._checks import GROUND_TRUTH
from mrcr_json._rows import SCHEMA, JsonWriter, RowSpec, build_row

from mrcr_gen._bins import bin_by_upper
from mrcr_gen._budget import AssemblyError
from mrcr_gen._tokens import row_token_count
from mrcr_gen.eval._items import EvalItem
from mrcr_gen.recipes import recipe_named
from mrcr_gen.validate import CheckContext

WRITER = JsonWriter()
RECIPE = recipe_named("mrcr-json")


def oracle(row: dict) -> str:
    return json.dumps({"prefix": row["random_string_to_prepend"], "text": row["answer"]})


def findings(row: dict, tokens: bool = True) -> list[str]:
    checks = GROUND_TRUTH.checker(CheckContext(file="f.parquet", count_tokens=tokens, tokenizer="o200k_base"))
    return [f.check for f in checks.check(row, 0).findings]


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 2**32), n_needles=st.sampled_from([2, 4, 8]))
def test_a_row_holds_its_needles_and_fits_its_bin(seed: int, n_needles: int) -> None:
    row, record = build_row(RowSpec(seed, n_needles, bin_by_upper(8192)), WRITER)
    messages = json.loads(row["prompt"])
    parsed = parse(messages)
    assert len(parsed.needles) == n_needles == row["n_needles"] == record["n_needles"]
    assert row["answer"] == messages[parsed.needles[parsed.k - 1]]["content"]
    assert parsed.prefix == row["random_string_to_prepend"]
    assert record["n_tokens"] == row_token_count(messages, row["answer"]) and record["n_tokens"] in bin_by_upper(8192)
    assert findings(row) == [] and grade(oracle(row), row["answer"], row["random_string_to_prepend"]) == 1.0


def test_rows_are_a_pure_function_of_their_spec() -> None:
    spec = RowSpec(7, 4, bin_by_upper(16384))
    assert build_row(spec, JsonWriter()) == build_row(spec, WRITER)
    assert build_row(spec, WRITER) != build_row(RowSpec(8, 4, bin_by_upper(16384)), WRITER)


def test_needles_that_cannot_fit_the_bin_are_refused() -> None:
    with pytest.raises(AssemblyError, match="cannot make a row of bin"):
        build_row(RowSpec(1, 8, bin_by_upper(8192).model_copy(update={"lower": 10, "upper": 200})), WRITER)


@pytest.mark.parametrize(
    ("reply", "score"),
    [
        ("Pz prefix then text", 0.0),  # not JSON
        ('["Pz", "a poem"]', 0.0),  # not an object
        ('{"prefix": "Qz", "text": "a poem"}', 0.0),  # another prefix
        ('{"prefix": "Pz", "text": 3}', 0.0),  # no text
        ('{"prefix": "Pz", "text": "a poem"}', 1.0),
        ('{"prefix": "Pz", "text": "a poet"}', SequenceMatcher(None, "a poet", "a poem").ratio()),
    ],
)
def test_the_grade_takes_a_json_object_with_the_prefix(reply: str, score: float) -> None:
    assert grade(reply, "a poem", "Pz") == score


def test_the_answer_form_splits_the_object() -> None:
    item = EvalItem(source="f", row=0, digest="d", recipe="mrcr-json", prefix="Pz")
    split = RECIPE.answer_form.split
    assert split('{"prefix": "Pz", "text": "a poem"}', item)[:2] == ("ok", "a poem")
    assert split('{"prefix": "x", "text": "Pz a poem"}', item)[:2] == ("late", "Pz a poem")
    assert split("a poem", item)[:2] == ("missing", "a poem")


def test_a_wrong_answer_or_count_is_found_and_fixed() -> None:
    row, _ = build_row(RowSpec(3, 4, bin_by_upper(8192)), WRITER)
    broken = row | {"answer": "something else", "n_needles": 2}
    assert findings(broken, tokens=False) == ["needle_count", "answer"]
    fixed = GROUND_TRUTH.fix(broken)
    assert fixed is not None and fixed[0] == row and len(fixed[1]) == 2
    assert findings(row | {"random_string_to_prepend": "other"}) == ["final_query"]
    assert GROUND_TRUTH.fix(row | {"random_string_to_prepend": "other"}) is None
    assert findings(row | {"prompt": "[]"}) == ["final_query"]


def test_the_reader_gives_items_and_transcripts(tmp_path: Path) -> None:
    rows = [build_row(RowSpec(seed, 2, bin_by_upper(8192)), WRITER)[0] for seed in range(3)]
    path = tmp_path / "rows.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), path)
    items = list(RECIPE.read_items(path, tokenizer_spec="o200k_base", skip=lambda row, digest: row == 1))
    assert [item.row for item in items] == [0, 1, 2] and items[1].messages == []
    for item, row in zip((items[0], items[2]), (rows[0], rows[2]), strict=True):
        assert item.bin_upper == 8192 and item.answer == row["answer"] and item.n_needles == 2
        assert RECIPE.grade(oracle(row), item) == 1.0
        found = transcript(item)
        assert found is not None and found.writings[found.needles[found.target - 1]].text == row["answer"]
