"""MRCR v2 as the commands see it: the `Recipe` every command dispatches through.

Module level stays light (the registry imports it at start-up); each method loads what it needs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from ..._errors import RequestError
from ..._ownership import FileSignature
from ..._recipe import BaseRecipe
from ...eval._floors import Floor
from ...eval._items import UNKNOWN_BIN, EvalItem
from ._workers import worker_preload

if TYPE_CHECKING:
    from ..._counts import RowCounts
    from ...eval._analysis import Transcript
    from ...generate import Generated, GenerateRequest, GenerationJob, GenerationResult, GenOption, ProgressBar
    from ...pool._harvest import HarvestedPair
    from ...validate import CheckSpec

NAME = "mrcr-v2"
#: Upstream's two noise models (`_eval.row_floors`): the hash plus a writing of the queried key, or plus any writing.
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


class MrcrV2(BaseRecipe):
    """Google DeepMind's MRCR v2 (google-deepmind/eval_hub `mrcr_v2`): one flat transcript per row,
    a hash to prepend, CSV (the upstream layout) or parquet with a `queries` column."""

    name = NAME
    title = "MRCR v2"
    #: Upstream's CSV (google-deepmind/eval_hub) and the same columns in parquet.
    signatures: tuple[FileSignature, ...] = (FileSignature(frozenset({"queries", "answer"}), ("csv", "parquet")),)

    def schemas(self) -> dict[str, type[BaseModel]]:
        from ._rows import V2Row

        return {"mrcr_v2_row": V2Row}

    # --- generation --------------------------------------------------------------------------

    @property
    def generation_options(self) -> tuple[GenOption, ...]:
        from ._options import OPTIONS

        return OPTIONS

    def worker_preload(self, request: GenerateRequest) -> tuple[str, ...]:
        return worker_preload(request.tokenizer, request.options.get("file_format") or "csv")

    def generate(self, request: GenerateRequest, progress: ProgressBar) -> Generated:
        from ...generate import generate_for
        from ._command import one_unit

        return generate_for(self, one_unit(request), progress)

    def plan_generation(self, request: GenerateRequest) -> GenerationJob:
        from ._command import plan_generation

        return plan_generation(request)

    def generation_summary(self, job: GenerationJob, result: GenerationResult) -> Generated:
        from ._command import generation_summary

        return generation_summary(job, result)

    # --- validation --------------------------------------------------------------------------

    def repair_refusal(self, mode: str) -> str | None:
        return "--fix does not apply to MRCR v2 files (column 'queries'); use --clean" if mode == "fix" else None

    def checking(self) -> CheckSpec:
        from ._validate import SPEC

        return SPEC

    # --- mrcr-gen pool harvest ---------------------------------------------------------------

    def harvest_rows(self, path: str | os.PathLike) -> Iterator[list[HarvestedPair | None]]:
        from ._harvest import harvest_rows

        return harvest_rows(path)

    # --- mrcr-grade --------------------------------------------------------------------------

    def grade_responses(
        self,
        data: str | os.PathLike,
        responses: str | os.PathLike | dict[int, str],
        *,
        allow_missing: bool = False,
        cache: bool = True,
        items: dict[int, EvalItem] | None = None,
    ) -> dict[str, Any]:
        from ...eval._responses import ResponsesError, responses_of
        from ._eval import grade_v2_responses

        try:
            return grade_v2_responses(
                Path(data), responses_of(responses), allow_missing=allow_missing, cache=cache, items=items
            )
        except (ResponsesError, ValueError, OSError) as exc:
            raise RequestError(str(exc).splitlines()[0]) from None

    def grade_report(self, result: dict[str, Any]) -> tuple[list[str], list[Any]]:
        from ._eval import render_v2_table

        mean = "-" if result["mean"] is None else f"{result['mean']:.4f}"
        return [f"MRCR v2: mean score {mean} over {result['n_rows']} rows (grade_v2, strict)"], [
            render_v2_table(result["report"])
        ]

    # --- eval -------------------------------------------------------------------------------

    def read_items(
        self,
        path: str | os.PathLike,
        *,
        tokenizer_spec: str = "o200k_base",
        skip: Callable[[int, str], bool] | None = None,
        counts: RowCounts | None = None,
    ) -> Iterator[EvalItem]:
        from ._eval import read_v2_items

        return read_v2_items(path, tokenizer_spec=tokenizer_spec, skip=skip, counts=counts)

    def grade(self, response: str, item: EvalItem) -> float:
        from ._grade import grade_v2

        return grade_v2(response, item.answer)

    def grade_lenient(self, response: str, item: EvalItem) -> float | None:
        from ._grade import grade_v2_lenient

        return grade_v2_lenient(response, item.answer)

    def transcript(self, item: EvalItem) -> Transcript | None:
        from ._analysis import transcript_of

        return transcript_of(item.messages[0]["content"]) if item.error is None and item.messages else None

    def query_only_messages(self, item: EvalItem) -> list[dict]:
        from ._eval import query_only_messages

        return query_only_messages(item)

    floors: tuple[Floor, ...] = (NEEDLE_FLOOR, WRITING_FLOOR)

    def item_floors(self, item: EvalItem) -> dict[str, float | None]:
        from ._eval import item_floors

        return item_floors(item)

    def item_extras(self, item: EvalItem) -> dict[str, Any]:
        return {} if item.error is not None or not item.messages else {"group": item.group}

    def bin_label(self, upper: int) -> str:
        if upper <= 0:
            return UNKNOWN_BIN  # a row that cannot be read far enough to count its tokens
        return f"({upper // 2}, {upper}]"  # its buckets: (4096, 8192] ... (4194304, 8388608]

    def bin_uppers(self) -> tuple[int, ...]:
        from ._generate import V2_BUCKET_EDGES

        return V2_BUCKET_EDGES

    def report_extras(self, records: list[dict[str, Any]], max_context_window: int | None) -> dict[str, Any]:
        from ._eval import v2_report

        return {"mrcr_v2": v2_report(records, max_context_window)}

    def report_tables(self, summary: dict[str, Any]) -> list[Any]:
        from ._eval import render_v2_table

        return [render_v2_table(summary["mrcr_v2"])] if summary.get("mrcr_v2") else []


RECIPE = MrcrV2()
