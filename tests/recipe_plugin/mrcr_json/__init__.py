"""mrcr-json, a recipe in a package of its own: openai/mrcr's task, answered with a JSON object
`{"prefix": "<the random string>", "text": "<the writing>"}`. Registered under the entry-point group
`mrcr_gen.recipes` (pyproject.toml); it imports only mrcr-gen's recipe-neutral core."""

from __future__ import annotations

from typing import Any

from mrcr_gen._recipe import BaseRecipe
from mrcr_gen.eval._items import AnswerForm, EvalItem

from . import _answers, _checks, _generate


class MrcrJson(BaseRecipe):
    """2, 4 or 8 identical asks in a long chat; the reply returns the one asked for, by ordinal, in JSON.
    `BaseRecipe` supplies every member not declared here."""

    name, title, version = _answers.NAME, "MRCR answered in JSON", _generate.VERSION
    answer_form: AnswerForm = _answers.JsonAnswer()

    def plan_generation(self, request: Any) -> Any:
        return _generate.plan(request)

    def checking(self) -> Any:
        return _checks.SPEC

    def read_items(self, path: Any, *, tokenizer_spec: str = "o200k_base", skip: Any = None) -> Any:
        return _answers.read_items(path, tokenizer_spec, skip)

    def grade(self, response: str, item: EvalItem) -> float:
        return _answers.grade(response, item.answer, item.prefix)

    def transcript(self, item: EvalItem) -> Any:
        return _answers.transcript(item)


RECIPE = MrcrJson()
