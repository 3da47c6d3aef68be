"""MRCR v2 (Google DeepMind's recipe, google-deepmind/eval_hub `mrcr_v2`): catalog, offline
writer, assembler, rows (CSV / parquet), checks, grader and eval reader.

Names are loaded on first use, so importing the package costs nothing until one is needed.
"""

from __future__ import annotations

import importlib

_NAMES = {
    "_text": ["ASK", "QUERY", "HEADER", "ORDINALS", "parse_query", "split_transcript"],
    "_catalog": ["V2Catalog", "V2Key", "load_v2_catalog"],
    "_offline": ["V2OfflineWriter", "compose_v2_writing"],
    "_assembler": ["Transcript", "V2Assembler", "counts_add_up"],
    "_rows": ["V2_COLUMNS", "V2_SCHEMA", "V2FileWriter", "V2Row", "iter_records", "iter_v2_rows"],
    "_generate": [
        "DEFAULT_V2_BUCKETS",
        "V2_BUCKETS",
        "V2Config",
        "bucket_rows",
        "generate_v2",
        "v2_bucket",
        "v2_bucket_for",
    ],
    "_checks": ["check_v2_record", "transcript_id"],
    "_validate": ["validate_v2_paths"],
    "_grade": ["grade_v2", "grade_v2_lenient"],
    "_eval": ["grade_v2_responses", "read_v2_items", "row_floors", "v2_report"],
    "_llm": ["V2OpenAIWriter"],
}
_LAZY = {name: module for module, names in _NAMES.items() for name in names}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'mrcr_gen.recipes.mrcr_v2' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    globals()[name] = value
    return value


__all__ = sorted(_LAZY)
