"""What a local pool's fork server imports first for this recipe's workers: a module of its own
(importing nothing heavy), since `mrcr-gen` asks before it has parsed its options."""

from __future__ import annotations

from ..._tokens import DEFAULT_TOKENIZER


def worker_preload(tokenizer: str = DEFAULT_TOKENIZER) -> tuple[str, ...]:
    """Modules a local pool's fork server imports first: workers start with the offline writer's
    word pools built, and o200k when it is the tokenizer (no need to build it for another), with
    the default catalog's asks counted by it. Named here, where nothing heavy is imported:
    `mrcr-gen` asks before it has parsed its options."""
    # The pools are rendered in a child (`_preload_start`) while the server imports and loads the
    # tokenizer, and taken last (`_preload`).
    first = ("mrcr_gen.recipes.openai_mrcr._preload_start", "mrcr_gen.recipes.openai_mrcr._generate")
    o200k = ("mrcr_gen._preload_o200k", "mrcr_gen.recipes.openai_mrcr._preload_asks")
    tokenizer_modules = o200k if tokenizer == DEFAULT_TOKENIZER else ()
    return (*first, *tokenizer_modules, "mrcr_gen.recipes.openai_mrcr._preload")
