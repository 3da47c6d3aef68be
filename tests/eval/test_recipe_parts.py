"""The evaluation part of a recipe as declarations: its answer form (how the failure analysis
splits a reply) and its reference floors (what the report shows and the control tests against)."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from mrcr_gen.eval._analysis import SplitReply, Transcript, Writing, split_prefix
from mrcr_gen.eval._control import control_test
from mrcr_gen.eval._failures import analyse_item
from mrcr_gen.eval._floors import Floor, declared_floors
from mrcr_gen.eval._items import EvalDefaults, EvalItem
from mrcr_gen.eval._report import render_table, summarize_records
from mrcr_gen.recipes import RECIPES

POEMS = ("roses are red and violets are blue, " * 3, "the sea is wide and the sky is grey, " * 3)
PREFIX = "aZ3kQ9"


def _transcript() -> Transcript:
    writings = tuple(
        Writing(index=2 * k, text=text, ask="write a poem about tides", format="poem", entity="tides", offset=100 * k)
        for k, text in enumerate(POEMS)
    )
    return Transcript(writings=writings, needles=(0, 1), target=2, prefix=PREFIX, length=300)


class JsonAnswer:
    """Replies as `{"prefix": ..., "text": ...}`: the form a recipe supplies in a few lines."""

    def split(self, reply: str, item: EvalItem) -> SplitReply:
        try:
            answer = json.loads(reply)
        except ValueError:
            return SplitReply("missing", reply)
        if not isinstance(answer, dict):
            return SplitReply("missing", reply)
        return SplitReply("ok" if answer.get("prefix") == item.prefix else "missing", str(answer.get("text", "")))


class Toy(EvalDefaults):
    name = "toy"

    def grade(self, response: str, item: EvalItem) -> float:
        return float(response == item.answer)

    def transcript(self, item: EvalItem) -> Transcript | None:
        return _transcript()


class JsonToy(Toy):
    name = "json-toy"
    answer_form = JsonAnswer()


ITEM = EvalItem(source="toy.parquet", row=0, digest="d", answer=POEMS[1], prefix=PREFIX, recipe="json-toy")


def test_a_recipes_own_answer_form_splits_its_replies_for_the_failure_analysis():
    reply = json.dumps({"prefix": PREFIX, "text": POEMS[1]})
    analysis = analyse_item(JsonToy(), ITEM, reply)
    assert analysis is not None
    assert analysis["prefix"] == "ok" and analysis["returned"] == "target" and analysis["match_ratio"] == 1.0
    wrong = analyse_item(JsonToy(), ITEM, json.dumps({"prefix": "other", "text": POEMS[0]}))
    assert wrong is not None and wrong["prefix"] == "missing" and wrong["returned_ordinal"] == 1
    # The default form (prefix glued to the writing) reads the same JSON reply as a late prefix
    # (the JSON's punctuation is no word, so the writing is still found): the form is what made
    # the prefix right.
    default = analyse_item(Toy(), ITEM, reply)
    assert default is not None and default["prefix"] == "late" and default["returned"] == "target"


@given(st.text(min_size=1), st.text())
def test_the_default_form_splits_prefix_plus_writing(prefix, body):
    assert split_prefix(prefix + body, prefix) == ("ok", body, "")
    if body and (body + prefix).find(prefix) == len(body):  # a prefix written last: both sides kept
        assert split_prefix(body + prefix, prefix) == ("late", "", body)


def _control_records(recipe: str, floor: dict) -> list[dict]:
    return [
        {"file": "f", "row": row, "recipe": recipe, "status": "ok", "score": 0.5, "bin": "(4096, 8192]",
         "n_needles": 2, "settings": None} | floor
        for row in range(4)
    ]


def test_a_recipe_without_floors_gets_the_controls_explicit_note_not_a_silent_zero():
    test = control_test(_control_records("toy", {}), (Toy(),))
    assert test["rows"] == 0 and test["untested"] == 4
    assert test["note"] == "toy declares no reference floor for the control: its 4 rows are not tested"
    run = {"settings": {"control": "query-only"}}
    summary = summarize_records(_control_records("toy", {}), run, recipes=(Toy(),))
    assert summary["memorization"]["note"] == test["note"]
    console = Console(width=400, record=True)
    console.print(render_table(summary))
    assert test["note"] in " ".join(console.export_text().split())  # the caption wraps


def test_the_built_in_recipes_are_tested_against_their_declared_control_floor():
    records = _control_records("openai-mrcr", {"floor_random_writing": 0.1})
    test = control_test(records, RECIPES)
    assert test["rows"] == 4 and "note" not in test
    assert test["test"] == "one-sided paired t-test of score - floor_random_writing > 0"


class Floored(Toy):
    name = "floored"
    floors = (
        Floor("floor_echo", label="echo floor", title="echo floor", guess="the query echoed", plotted=True),
        Floor("floor_blank", label="blank floor", title="blank-text floor", guess="nothing", control=True),
    )

    def item_floors(self, item: EvalItem) -> dict[str, float | None]:
        return {"floor_echo": 0.25, "floor_blank": 0.0}


def test_the_report_shows_the_floors_a_recipe_declares():
    records = _control_records("floored", {"floor_echo": 0.25, "floor_blank": 0.0})
    summary = summarize_records(records, {}, recipes=(Floored(),))
    (cell,) = summary["cells"]
    assert cell["floor_echo"] == 0.25 and cell["floor_blank"] == 0.0
    assert not any(key.startswith("floor_random") for key in cell)
    console = Console(width=400, record=True)
    console.print(render_table(summary, floors=declared_floors((Floored(),))))
    text = " ".join(console.export_text().split())
    assert "echo floor" in text and "blank floor" in text and "needle floor" not in text
    assert "answering the prefix plus the query echoed / plus nothing" in text
    control = summarize_records(records, {"settings": {"control": "query-only"}}, recipes=(Floored(),))
    assert control["memorization"]["rows"] == 4 and control["memorization"]["floor_mean"] == 0.0
    assert control["memorization"]["test"] == "one-sided paired t-test of score - floor_blank > 0"


def test_the_built_ins_declare_the_floors_their_records_hold():
    assert [f.name for f in declared_floors(RECIPES)] == ["floor_random_needle", "floor_random_writing"]
