"""openai/mrcr as the commands see it: the `Recipe` every command dispatches through.

Module level stays light (the registry imports it at start-up); each method loads what it needs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from pydantic import BaseModel

from ..._ownership import FileSignature
from ..._recipe import BaseRecipe
from ...eval._floors import Floor
from ...eval._items import EvalItem
from ._workers import worker_preload

if TYPE_CHECKING:
    from ..._counts import RowCounts
    from ...eval._analysis import Transcript
    from ...generate import Generated, GenerateRequest, GenerationJob, GenerationResult, GenOption
    from ...pool._harvest import HarvestedPair
    from ...validate import CheckSpec

NAME = "openai-mrcr"
#: What guessing scores (`_floors`): the prefix plus a needle of the queried ask, or plus any writing.
NEEDLE_FLOOR = Floor(
    "floor_random_needle",
    label="needle floor",
    title="random-needle floor",
    guess="a random needle of the right ask",
    plotted=True,
)
WRITING_FLOOR = Floor(
    "floor_random_writing", label="writing floor", title="random-writing floor", guess="a random writing", control=True
)


class OpenaiMrcr(BaseRecipe):
    """2, 4 or 8 identical asks in a long chat, asked for by ordinal (the `openai/mrcr` dataset)."""

    name = NAME
    title = "openai/mrcr"
    #: The official openai/mrcr parquet: its prompt column and its random string identify it.
    signatures: tuple[FileSignature, ...] = (FileSignature(frozenset({"prompt", "random_string_to_prepend"})),)
    inspect_task = "mrcr"  # Inspect's `mrcr_gen/mrcr`, the first task there was
    #: What the Inspect task reads without `-T data`: every file of openai/mrcr on the Hub, at the
    #: commit of its public release (pinned: the same rows whenever it runs).
    default_data = "hf://datasets/openai/mrcr@f4c69fae7cf81f7ca26b9fee34b392a50f6b8a1d"
    #: Its up-front check (needles fit) runs in a worker of the local pool, whatever the job.
    workers_always_used = True

    def schemas(self) -> dict[str, type[BaseModel]]:
        from ..._models import Ask, FormatSpec, Message, Writing
        from ._models import Answer, Conversation, MrcrRow, Needle, Sample

        return {
            "message": Message,
            "conversation": Conversation,
            "ask": Ask,
            "writing": Writing,
            "needle": Needle,
            "answer": Answer,
            "mrcr_row": MrcrRow,
            "sample": Sample,
            "format_spec": FormatSpec,
        }

    # --- generation --------------------------------------------------------------------------

    @property
    def generation_options(self) -> tuple[GenOption, ...]:
        from ._options import OPTIONS

        return OPTIONS

    def worker_preload(self, request: GenerateRequest) -> tuple[str, ...]:
        return worker_preload(request.tokenizer)

    def plan_generation(self, request: GenerateRequest) -> GenerationJob:
        from ._command import plan_generation

        return plan_generation(request)

    def generation_summary(self, job: GenerationJob, result: GenerationResult) -> Generated:
        from ._command import generation_summary

        return generation_summary(job, result)

    # --- validation --------------------------------------------------------------------------

    def checking(self) -> CheckSpec:
        from ._validate import SPEC

        return SPEC  # it cleans and fixes (`CheckingDefaults.repair_refusal`)

    # --- mrcr-gen pool harvest ---------------------------------------------------------------

    def harvest_rows(self, path: str | os.PathLike) -> Iterator[list[HarvestedPair | None]]:
        from ._harvest import harvest_rows

        return harvest_rows(path)

    def writing_reference(self) -> dict[str, tuple[int, int, int]]:
        from ._catalog import writing_reference

        return writing_reference()

    # --- mrcr-grade --------------------------------------------------------------------------

    # --- eval -------------------------------------------------------------------------------

    def read_items(
        self,
        path: str | os.PathLike,
        *,
        tokenizer_spec: str = "o200k_base",
        skip: Callable[[int, str], bool] | None = None,
        counts: RowCounts | None = None,
    ) -> Iterator[EvalItem]:
        from ._eval import read_mrcr_items

        return read_mrcr_items(path, tokenizer_spec=tokenizer_spec, skip=skip, counts=counts)

    def grade(self, response: str, item: EvalItem) -> float:
        from ._grade import grade

        return grade(response, item.answer, item.prefix)

    def grade_lenient(self, response: str, item: EvalItem) -> float | None:
        from ._grade import grade_lenient

        return grade_lenient(response, item.answer, item.prefix)

    def transcript(self, item: EvalItem) -> Transcript | None:
        from ._analysis import transcript_of

        return transcript_of(item.messages, item.prefix) if item.error is None and item.messages else None

    def query_only_messages(self, item: EvalItem) -> list[dict]:
        """The few-shot preamble (messages[0]) and the final query, without the conversation between.
        The preamble stays: it holds no writing of the queried ask (its worked examples use other
        asks), it is what shows the model the answer's form (prefix, then the writing), and with it
        the control differs from the full run in the haystack alone."""
        from ._checks_asks import is_preamble

        messages = item.messages
        return [*messages[:1], messages[-1]] if len(messages) > 1 and is_preamble(messages[0]) else messages[-1:]

    floors: tuple[Floor, ...] = (NEEDLE_FLOOR, WRITING_FLOOR)

    def item_floors(self, item: EvalItem) -> dict[str, float | None]:
        from ._floors import row_floors

        floors = row_floors(item.messages, item.answer, item.prefix)
        return {NEEDLE_FLOOR.name: floors.random_needle, WRITING_FLOOR.name: floors.random_writing}


RECIPE = OpenaiMrcr()
