"""JSON Schema documents exported from the Pydantic models into `schemas/`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel

from ._files import write_text_atomic
from ._recipe import Recipe


def schema_models(recipes: Sequence[Recipe]) -> dict[str, type[BaseModel]]:
    """Every exported model by file stem, as the recipes list them (shared shapes once), then the
    core's own: a row's failure analysis and what a run's summary adds up from them."""
    from .eval._analysis import RowAnalysis
    from .eval._shapes import FailureSummary, Intervals

    core: dict[str, type[BaseModel]] = {
        "row_analysis": RowAnalysis,
        "failure_summary": FailureSummary,
        "intervals": Intervals,
    }
    return {stem: model for recipe in recipes for stem, model in recipe.schemas().items()} | core


def schema_documents(recipes: Sequence[Recipe]) -> dict[str, str]:
    """File name -> JSON text, exactly as written to `schemas/`."""
    return {
        f"{stem}.schema.json": json.dumps(model.model_json_schema(), indent=2) + "\n"
        for stem, model in schema_models(recipes).items()
    }


def export_schemas(out: Path, recipes: Sequence[Recipe]) -> list[Path]:
    """Write every schema document into `out`, removing stale ones; returns the files written."""
    out.mkdir(parents=True, exist_ok=True)
    documents = schema_documents(recipes)
    for stale in out.glob("*.schema.json"):
        if stale.name not in documents:
            stale.unlink()
    for name, text in documents.items():
        write_text_atomic(out / name, text)
    return [out / name for name in documents]


def stale_schemas(out: Path, recipes: Sequence[Recipe]) -> list[str]:
    """Names of schema files in `out` that are missing, extra or differ from the models."""
    documents = schema_documents(recipes)
    present = {p.name: p.read_text(encoding="utf-8") for p in out.glob("*.schema.json")} if out.is_dir() else {}
    return sorted(name for name in documents.keys() | present.keys() if documents.get(name) != present.get(name))
