"""mrcr-json, a recipe in a package of its own: openai/mrcr's task, answered with a JSON object
`{"prefix": "<the random string>", "text": "<the writing>"}`. Registered under the entry-point group
`mrcr_gen.recipes` (pyproject.toml); it imports only mrcr-gen's recipe-neutral core."""

from __future__ import annotations

from typing import Any

from mrcr_gen._errors import RequestError
from mrcr_gen._recipe import BaseRecipe
from mrcr_gen.eval._chat import read_chat_items
from mrcr_gen.eval._items import AnswerForm, EvalItem
from mrcr_gen.generate import GenerateRequest, GenerationJob, row_job

from . import _answers


class MrcrJson(BaseRecipe):
    """2, 4 or 8 identical asks in a long chat; the reply returns the one asked for, by ordinal, in JSON.
    `BaseRecipe` supplies every member not declared here."""

    name, title, version = _answers.NAME, "MRCR answered in JSON", "1"
    answer_form: AnswerForm = _answers.JsonAnswer()

    def plan_generation(self, request: GenerateRequest) -> GenerationJob:
        """`samples` rows per needle count and bin (`row_job`), from the offline writer."""
        if request.tokens is not None or request.writer != "offline":
            raise RequestError(f"--recipe {self.name} takes neither --tokens nor a --writer other than offline")
        from ._rows import SCHEMA, JsonWriter, build_row  # here: loading the recipe stays cheap (no pyarrow)

        return row_job(
            request, recipe=self.name, version=self.version, schema=SCHEMA, build=build_row, writer=JsonWriter
        )

    def checking(self) -> Any:
        from ._checks import SPEC

        return SPEC

    def read_items(self, path: Any, *, tokenizer_spec: str = "o200k_base", skip: Any = None, counts: Any = None) -> Any:
        return read_chat_items(_answers.ROWS, path, tokenizer_spec=tokenizer_spec, skip=skip, counts=counts)

    def grade(self, response: str, item: EvalItem) -> float:
        return _answers.grade(response, item.answer, item.prefix)

    def transcript(self, item: EvalItem) -> Any:
        return _answers.transcript(item)


RECIPE = MrcrJson()
