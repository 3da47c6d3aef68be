"""What a local pool's fork server imports first for this recipe's workers: a module of its own
(importing nothing heavy), since `mrcr-gen` asks before it has parsed its options."""

from __future__ import annotations

from ..._tokens import DEFAULT_TOKENIZER


def worker_preload(tokenizer: str = DEFAULT_TOKENIZER, file_format: str = "csv") -> tuple[str, ...]:
    """Modules a local pool's fork server imports first (o200k built when it is the tokenizer,
    pyarrow when the files are parquet). Named here, where nothing heavy is imported: `mrcr-gen`
    asks before it has parsed its options."""
    modules = ("mrcr_gen.recipes.mrcr_v2._generate", *(("pyarrow.parquet",) if file_format == "parquet" else ()))
    return (*modules, "mrcr_gen._preload_o200k") if tokenizer == DEFAULT_TOKENIZER else modules
