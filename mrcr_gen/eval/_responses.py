"""`mrcr-grade`: grade a RESPONSES.jsonl (`{"row": i, "response": "..."}` per line) against DATA."""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypedDict

from .._bins import bin_sort_key
from ._failures import analyse_item, failure_summary
from ._items import EvalItem, EvalRecipe, FileError, read_items, recipe_named


class ResponsesError(ValueError):
    """RESPONSES.jsonl does not match DATA (bad line, missing or extra row)."""


class GradedRow(TypedDict):
    row: int
    score: float
    bin: str
    n_needles: int
    analysis: dict | None  # `_analysis.RowAnalysis` as a dict; None when the row's conversation cannot be read


def _preview(indices: list[int], limit: int = 5) -> str:
    shown = ", ".join(map(str, indices[:limit]))
    return shown + (f" and {len(indices) - limit} more" if len(indices) > limit else "")


def read_responses(path: str | os.PathLike) -> dict[int, str]:
    """row -> response; a bad line or a duplicated row raises `ResponsesError` naming the line."""
    responses: dict[int, str] = {}
    name = Path(path).name
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError as exc:  # a JSONDecodeError, or e.g. an integer too long to convert
                reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
                raise ResponsesError(f"{name}:{number}: not valid JSON ({reason})") from None
            if not isinstance(obj, dict) or "row" not in obj or "response" not in obj:
                raise ResponsesError(f'{name}:{number}: expected an object with "row" and "response"')
            row, response = obj["row"], obj["response"]
            if not isinstance(row, int) or isinstance(row, bool) or row < 0:
                raise ResponsesError(f'{name}:{number}: "row" must be a non-negative integer, got {row!r}')
            if not isinstance(response, str):
                raise ResponsesError(f'{name}:{number}: "response" must be a string, got {type(response).__name__}')
            if row in responses:
                raise ResponsesError(f"{name}:{number}: row {row} has a second response")
            responses[row] = response
    return responses


def responses_of(responses: str | os.PathLike | dict[int, str]) -> dict[int, str]:
    """row -> response: `responses` itself when it is a dict, else its file read (`read_responses`)."""
    return responses if isinstance(responses, dict) else read_responses(responses)


def grade_responses(
    data: str | os.PathLike,
    responses: str | os.PathLike | dict[int, str],
    *,
    recipes: Sequence[EvalRecipe],
    allow_missing: bool = False,
    cache: bool = True,
    items: dict[int, EvalItem] | None = None,
) -> dict[str, Any]:
    """Grade responses against DATA with the official grader of each row's recipe, through the
    core (what `mrcr_gen.Recipe.grade_responses` does unless the recipe grades its own way;
    `mrcr_gen.grade_responses` takes the recipe's).

    Returns `{"mean": m, "rows": [{"row", "score", "bin", "n_needles", "analysis"}], "cells": [...],
    "n_rows": ..., "missing": [...], "failures": ...}` (`analysis`: the per-row failure analysis;
    `failures`: what they add up to, see `_failures.failure_summary`). Every row of DATA needs
    exactly one response unless `allow_missing`; a response for a row DATA lacks is always an error. A DATA file or row
    that cannot be read, or a row that cannot be graded, raises `FileError` (a ValueError) naming
    it and the validator's check. A row's token counts (its bin) come from the file's sealed
    sidecar, else the count cache (unless `cache` is False: `--no-cache`), else are counted.
    `items`, when given, receives the item of each graded row (what `graded_view` shows), so
    that the page never reads or counts a row again.
    """
    given = responses_of(responses)
    rows_out: list[GradedRow] = []
    missing: list[int] = []
    n_data = 0
    for item in read_items(data, recipes=recipes, skip=lambda row, digest: row not in given, cache=cache):
        n_data += 1
        if item.row not in given:
            missing.append(item.row)
            continue
        if item.error is not None:
            raise FileError(f"{data}: row {item.row}: {item.error.check}: {item.error.message}")
        recipe = recipe_named(item.recipe, recipes)
        if items is not None:
            items[item.row] = item
        rows_out.append(
            {
                "row": item.row,
                "score": recipe.grade(given[item.row], item),
                "bin": recipe.bin_label(item.bin_upper),
                "n_needles": item.n_needles,
                "analysis": analyse_item(recipe, item, given[item.row]),
            }
        )
    extra = sorted(i for i in given if i >= n_data)
    if extra:
        raise ResponsesError(
            f"responses for rows that DATA lacks (it has {n_data} rows, 0-{n_data - 1}): {_preview(extra)}"
        )
    if missing and not allow_missing:
        raise ResponsesError(
            f"no response for {len(missing)} of {n_data} rows: {_preview(missing)} "
            "(use --allow-missing to grade the rest)"
        )
    cells: dict[tuple[str, int], list[float]] = defaultdict(list)
    for record in rows_out:
        cells[(record["bin"], record["n_needles"])].append(record["score"])
    scores = [r["score"] for r in rows_out]
    return {
        "mean": sum(scores) / len(scores) if scores else None,
        "n_rows": len(rows_out),
        "missing": missing,
        "rows": rows_out,
        "failures": failure_summary([r | {"status": "ok"} for r in rows_out]),
        "cells": [
            {"bin": b, "n_needles": n, "count": len(v), "mean": sum(v) / len(v)}
            for (b, n), v in sorted(cells.items(), key=lambda kv: (bin_sort_key(kv[0][0]), kv[0][1]))
        ],
    }
