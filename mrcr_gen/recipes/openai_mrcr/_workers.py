"""What a local pool's fork server imports first for this recipe's workers: a module of its own
(importing nothing heavy), since `mrcr-gen` asks before it has parsed its options."""

from __future__ import annotations

from ..._tokens import DEFAULT_TOKENIZER


def worker_preload(tokenizer: str = DEFAULT_TOKENIZER) -> tuple[str, ...]:
    """Modules a local pool's fork server imports first: workers start with the offline writer's
    word pools built, and o200k when it is the tokenizer (no need to build it for another). Named
    here, where nothing heavy is imported: `mrcr-gen` asks before it has parsed its options."""
    modules = ("mrcr_gen.recipes.openai_mrcr._generate", "mrcr_gen.recipes.openai_mrcr._preload")
    return (*modules, "mrcr_gen._preload_o200k") if tokenizer == DEFAULT_TOKENIZER else modules
