"""mrcr-gen: generate, validate and evaluate MRCR long-context datasets."""

# --- recipe-neutral core ---
from ._bins import BIN_UPPER_EDGES, BINS, Bin, bin_by_upper, bin_for_tokens
from ._budget import AssemblyError
from ._models import Ask, FormatSpec, Message, Writing, normalize_ask, ordinal
from ._tokens import Tokenizer, TokenizerError, count_tokens, count_tokens_batch, load_tokenizer, o200k, row_token_count
from ._version import __version__

# --- openai/mrcr: generator and validator ---
from .recipes.openai_mrcr._assembler import Assembler
from .recipes.openai_mrcr._catalog import Catalog, load_catalog
from .recipes.openai_mrcr._checks import validate_row
from .recipes.openai_mrcr._generate import GenerateConfig, GenerateResult, generate_dataset, generate_sample
from .recipes.openai_mrcr._models import Answer, Conversation, MrcrRow, Needle, Sample
from .recipes.openai_mrcr._offline import OfflineWriter
from .recipes.openai_mrcr._rows import MRCR_COLUMNS, MRCR_SCHEMA, iter_rows, write_rows
from .recipes.openai_mrcr._validate import validate_file, validate_paths
from .validate import Finding, RowResult, ValidationReport
from .writers import Writer

# Pools and evaluation import the openai client (~0.5 s): loaded on first use of their names.
_OPENAI = "recipes.openai_mrcr"
_V2 = "recipes.mrcr_v2"
_LAZY = {
    "BuildReport": f"{_OPENAI}._pool_llm",
    "build_pool_openai": f"{_OPENAI}._pool_llm",
    "build_pool_for_request": f"{_OPENAI}._shortcut",
    **dict.fromkeys(["PoolError", "PoolTooSmall", "PoolWriter", "PoolWriting", "read_pool", "write_pool"], "pool"),
    **dict.fromkeys(["grade", "grade_lenient"], f"{_OPENAI}._grade"),
    **dict.fromkeys(["Floors", "row_floors"], f"{_OPENAI}._floors"),
    **dict.fromkeys(
        [
            "EvalConfig",
            "EvalError",
            "EvalFatal",
            "EvalItem",
            "ResponsesError",
            "RunStats",
            "ViewReport",
            "plot_summary",
            "render_compare",
            "render_table",
            "render_view",
            "write_html",
        ],
        "eval",
    ),
    **dict.fromkeys(
        [
            "add_analyses",
            "compare_runs",
            "grade_responses",
            "graded_view",
            "harvest",
            "health_report",
            "read_items",
            "run_eval",
            "run_eval_async",
            "run_view",
            "summarize_run",
            "write_report",
        ],
        "_api",
    ),
    **dict.fromkeys(["export_batch", "import_batch", "run_batch_async"], "_api"),
    **dict.fromkeys(["grade_v2", "grade_v2_lenient"], f"{_V2}._grade"),
    **dict.fromkeys(["V2Config", "generate_v2"], f"{_V2}._generate"),
    **dict.fromkeys(["read_v2_items", "v2_report"], f"{_V2}._eval"),
}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'mrcr_gen' has no attribute {name!r}")
    import importlib

    module = importlib.import_module(f".{_LAZY[name]}", __name__)
    value = getattr(module, name)
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
