"""What a generated dataset leaves beside its files for validators to read back: the dataset card's
tokenizer line and the per-file sidecar of row samples."""

from __future__ import annotations

import json
import re
from pathlib import Path


def sidecar_path(parquet_path: Path) -> Path:
    return parquet_path.with_name(parquet_path.name.removesuffix(".parquet") + ".samples.jsonl")


CARD_TOKENIZER = re.compile(r'^  tokenizer: (".*")$', re.MULTILINE)


def card_tokenizer(card_text: str) -> str | None:
    """The tokenizer spec a dataset card's YAML header names, or None (e.g. openai/mrcr's own card)."""
    if not card_text.startswith("---\n"):
        return None
    header = card_text[4 : card_text.find("\n---", 4)]
    match = CARD_TOKENIZER.search(header)
    return json.loads(match.group(1)) if match else None
