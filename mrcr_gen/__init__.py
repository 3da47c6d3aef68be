"""mrcr-gen: generate, validate and evaluate MRCR long-context datasets."""

# --- generator (lead) ---
from ._assembler import Assembler, AssemblyError
from ._bins import BIN_UPPER_EDGES, BINS, Bin, bin_by_upper, bin_for_tokens
from ._catalog import Catalog, load_catalog
from ._generate import GenerateConfig, GenerateResult, generate_dataset, generate_sample
from ._models import (
    Answer,
    Ask,
    Conversation,
    FormatSpec,
    Message,
    MrcrRow,
    Needle,
    Sample,
    Writing,
    normalize_ask,
    ordinal,
)
from ._parquet import MRCR_COLUMNS, MRCR_SCHEMA, iter_rows, write_rows
from ._tokens import Tokenizer, TokenizerError, count_tokens, count_tokens_batch, load_tokenizer, o200k, row_token_count
from ._version import __version__

# --- validator ---
from .validate import (
    Finding,
    RowResult,
    ValidationReport,
    validate_file,
    validate_paths,
    validate_row,
)
from .writers import OfflineWriter, Writer

# Pools and evaluation import the openai client (~0.5 s): loaded on first use of their names.
_LAZY = {
    **dict.fromkeys(
        [
            "BuildReport",
            "PoolError",
            "build_pool_for_request",
            "PoolTooSmall",
            "PoolWriter",
            "PoolWriting",
            "build_pool_openai",
            "harvest",
            "read_pool",
            "write_pool",
        ],
        "pool",
    ),
    **dict.fromkeys(
        [
            "EvalConfig",
            "EvalError",
            "EvalFatal",
            "EvalItem",
            "Floors",
            "ResponsesError",
            "RunStats",
            "compare_runs",
            "grade",
            "grade_lenient",
            "grade_responses",
            "plot_summary",
            "read_items",
            "render_table",
            "row_floors",
            "run_eval",
            "run_eval_async",
            "write_report",
        ],
        "eval",
    ),
    "summarize_run": "eval",
    **dict.fromkeys(["grade_v2", "grade_v2_lenient", "V2Config", "generate_v2", "read_v2_items", "v2_report"], "v2"),
}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'mrcr_gen' has no attribute {name!r}")
    import importlib

    module = importlib.import_module(f".{_LAZY[name]}", __name__)
    value = getattr(module, "summarize" if name == "summarize_run" else name)
    globals()[name] = value
    return value


__all__ = [
    "__version__",
    "BIN_UPPER_EDGES",
    "BINS",
    "Bin",
    "bin_by_upper",
    "bin_for_tokens",
    "Catalog",
    "load_catalog",
    "Answer",
    "Ask",
    "Conversation",
    "FormatSpec",
    "Message",
    "MrcrRow",
    "Needle",
    "Sample",
    "Writing",
    "ordinal",
    "MRCR_COLUMNS",
    "MRCR_SCHEMA",
    "iter_rows",
    "write_rows",
    "count_tokens",
    "count_tokens_batch",
    "o200k",
    "row_token_count",
    "load_tokenizer",
    "Tokenizer",
    "TokenizerError",
    "Assembler",
    "AssemblyError",
    "normalize_ask",
    "GenerateConfig",
    "GenerateResult",
    "generate_dataset",
    "generate_sample",
    "OfflineWriter",
    "Writer",
    "Finding",
    "RowResult",
    "ValidationReport",
    "validate_file",
    "validate_paths",
    "validate_row",
    *_LAZY,
]
