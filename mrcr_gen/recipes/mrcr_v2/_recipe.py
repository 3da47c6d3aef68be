"""MRCR v2 as the commands see it: the `Recipe` every command dispatches through.

Module level stays light (the registry imports it at start-up); each method loads what it needs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from pydantic import BaseModel

from ..._request import Generated, GenerateRequest, ProgressBar
from ...eval._items import EvalItem

NAME = "mrcr-v2"


class MrcrV2:
    """Google DeepMind's MRCR v2 (google-deepmind/eval_hub `mrcr_v2`): one flat transcript per row,
    a hash to prepend, CSV (the upstream layout) or parquet with a `queries` column."""

    name = NAME
    title = "MRCR v2"

    def recognises(self, columns: Sequence[str]) -> bool:
        return "queries" in columns

    def schemas(self) -> dict[str, type[BaseModel]]:
        from ._rows import V2Row

        return {"mrcr_v2_row": V2Row}

    # --- generation --------------------------------------------------------------------------

    def generate(self, request: GenerateRequest, progress: ProgressBar) -> Generated:
        from ._command import generate

        return generate(request, progress)

    # --- eval -------------------------------------------------------------------------------

    def read_items(
        self,
        path: str | os.PathLike,
        *,
        tokenizer_spec: str = "o200k_base",
        skip: Callable[[int, str], bool] | None = None,
    ) -> Iterator[EvalItem]:
        from ._eval import read_v2_items

        return read_v2_items(path, tokenizer_spec=tokenizer_spec, skip=skip)

    def grade(self, response: str, item: EvalItem) -> float:
        from ._grade import grade_v2

        return grade_v2(response, item.answer)

    def grade_lenient(self, response: str, item: EvalItem) -> float | None:
        from ._grade import grade_v2_lenient

        return grade_v2_lenient(response, item.answer)

    def item_extras(self, item: EvalItem) -> dict[str, Any]:
        from ._eval import item_extras

        return item_extras(item)

    def bin_label(self, upper: int) -> str:
        return f"({upper // 2}, {upper}]"  # its buckets: (4096, 8192] ... (4194304, 8388608]

    def report_extras(self, records: list[dict[str, Any]], max_context_window: int | None) -> dict[str, Any]:
        from ._eval import v2_report

        return {"mrcr_v2": v2_report(records, max_context_window)}

    def report_tables(self, summary: dict[str, Any]) -> list[Any]:
        from ._eval import render_v2_table

        return [render_v2_table(summary["mrcr_v2"])] if summary.get("mrcr_v2") else []


RECIPE = MrcrV2()
