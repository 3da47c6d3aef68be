"""JSON Schema documents exported from the Pydantic models into `schemas/`."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel

from ._files import write_text_atomic
from ._models import Ask, FormatSpec, Message, Writing
from .recipes.openai_mrcr._models import Answer, Conversation, MrcrRow, Needle, Sample


def schema_models() -> dict[str, type[BaseModel]]:
    """Every exported model by file stem."""
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
        "mrcr_v2_row": _v2_row(),
    }


def _v2_row() -> type[BaseModel]:
    from .recipes.mrcr_v2._rows import V2Row

    return V2Row


def schema_documents() -> dict[str, str]:
    """File name -> JSON text, exactly as written to `schemas/`."""
    return {
        f"{stem}.schema.json": json.dumps(model.model_json_schema(), indent=2) + "\n"
        for stem, model in schema_models().items()
    }


def export_schemas(out: Path) -> list[Path]:
    """Write every schema document into `out`, removing stale ones; returns the files written."""
    out.mkdir(parents=True, exist_ok=True)
    documents = schema_documents()
    for stale in out.glob("*.schema.json"):
        if stale.name not in documents:
            stale.unlink()
    for name, text in documents.items():
        write_text_atomic(out / name, text)
    return [out / name for name in documents]


def stale_schemas(out: Path) -> list[str]:
    """Names of schema files in `out` that are missing, extra or differ from the models."""
    documents = schema_documents()
    present = {p.name: p.read_text(encoding="utf-8") for p in out.glob("*.schema.json")} if out.is_dir() else {}
    return sorted(name for name in documents.keys() | present.keys() if documents.get(name) != present.get(name))
