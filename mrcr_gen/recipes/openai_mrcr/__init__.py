"""The openai/mrcr recipe: 2, 4 or 8 identical asks hidden in a long chat, asked for by ordinal,
in the exact parquet schema of the `openai/mrcr` dataset. Its catalog, offline writer, assembler,
generation, row layout, checks, repair, eval reader, grader and floors live here; `RECIPE` is what
the commands dispatch through."""

from __future__ import annotations

import importlib

#: Public names, loaded on first use (the pool builder imports the openai client, ~0.5 s).
_NAMES = {
    "_pool_llm": ["BuildError", "build_pool_openai", "plan_asks", "price_for", "print_build_report", "writing_params"],
    "_pool_batch": ["import_results", "results_price"],
    "_pool_batches": ["build_pool_batch"],
}
_LAZY = {name: module for module, names in _NAMES.items() for name in names}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'mrcr_gen.recipes.openai_mrcr' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    globals()[name] = value
    return value


__all__ = sorted(_LAZY)
