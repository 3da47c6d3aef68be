"""mrcr-gen: generate, validate and evaluate MRCR long-context datasets."""

from typing import TYPE_CHECKING

from ._version import __version__

if TYPE_CHECKING:  # what each name is, for type checkers and the API docs; imported on first use
    from ._api import (
        add_analyses,
        compare_runs,
        export_batch,
        grade_responses,
        graded_view,
        harvest,
        health_report,
        import_batch,
        read_items,
        run_batch_async,
        run_eval,
        run_eval_async,
        run_view,
        summarize_run,
        write_report,
    )
    from ._bins import BIN_UPPER_EDGES, BINS, Bin, bin_by_upper, bin_for_tokens
    from ._budget import AssemblyError
    from ._models import Ask, FormatSpec, Message, Writing, normalize_ask, ordinal
    from ._tokens import (
        Tokenizer,
        TokenizerError,
        count_tokens,
        count_tokens_batch,
        load_tokenizer,
        o200k,
        row_token_count,
    )
    from .eval import (
        EvalConfig,
        EvalError,
        EvalFatal,
        EvalItem,
        ResponsesError,
        RunStats,
        ViewReport,
        plot_summary,
        render_compare,
        render_table,
        render_view,
        write_html,
    )
    from .pool import PoolError, PoolTooSmall, PoolWriter, PoolWriting, read_pool, write_pool
    from .recipes.mrcr_v2._eval import read_v2_items, v2_report
    from .recipes.mrcr_v2._generate import V2Config, generate_v2
    from .recipes.mrcr_v2._grade import grade_v2, grade_v2_lenient
    from .recipes.openai_mrcr._assembler import Assembler
    from .recipes.openai_mrcr._catalog import Catalog, load_catalog
    from .recipes.openai_mrcr._checks import validate_row
    from .recipes.openai_mrcr._floors import Floors, row_floors
    from .recipes.openai_mrcr._generate import GenerateConfig, GenerateResult, generate_dataset, generate_sample
    from .recipes.openai_mrcr._grade import grade, grade_lenient
    from .recipes.openai_mrcr._models import Answer, Conversation, MrcrRow, Needle, Sample
    from .recipes.openai_mrcr._offline import OfflineWriter
    from .recipes.openai_mrcr._pool_llm import BuildReport, build_pool_openai
    from .recipes.openai_mrcr._rows import MRCR_COLUMNS, MRCR_SCHEMA, iter_rows, write_rows
    from .recipes.openai_mrcr._shortcut import build_pool_for_request
    from .recipes.openai_mrcr._validate import validate_file, validate_paths
    from .validate import Finding, RowResult, ValidationReport
    from .writers import Writer

# Every name loads on first use (`__getattr__`): a command's start (`mrcr-gen --help`) imports
# only what it uses, never the tokenizer, pyarrow or the openai client for nothing.
_OPENAI = "recipes.openai_mrcr"
_V2 = "recipes.mrcr_v2"
_LAZY = {
    **dict.fromkeys(["BIN_UPPER_EDGES", "BINS", "Bin", "bin_by_upper", "bin_for_tokens"], "_bins"),
    "AssemblyError": "_budget",
    **dict.fromkeys(["Ask", "FormatSpec", "Message", "Writing", "normalize_ask", "ordinal"], "_models"),
    **dict.fromkeys(
        [
            "Tokenizer",
            "TokenizerError",
            "count_tokens",
            "count_tokens_batch",
            "load_tokenizer",
            "o200k",
            "row_token_count",
        ],
        "_tokens",
    ),
    "Assembler": f"{_OPENAI}._assembler",
    **dict.fromkeys(["Catalog", "load_catalog"], f"{_OPENAI}._catalog"),
    "validate_row": f"{_OPENAI}._checks",
    **dict.fromkeys(
        ["GenerateConfig", "GenerateResult", "generate_dataset", "generate_sample"], f"{_OPENAI}._generate"
    ),
    **dict.fromkeys(["Answer", "Conversation", "MrcrRow", "Needle", "Sample"], f"{_OPENAI}._models"),
    "OfflineWriter": f"{_OPENAI}._offline",
    **dict.fromkeys(["MRCR_COLUMNS", "MRCR_SCHEMA", "iter_rows", "write_rows"], f"{_OPENAI}._rows"),
    **dict.fromkeys(["validate_file", "validate_paths"], f"{_OPENAI}._validate"),
    **dict.fromkeys(["Finding", "RowResult", "ValidationReport"], "validate"),
    "Writer": "writers",
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
    "BINS",
    "BIN_UPPER_EDGES",
    "MRCR_COLUMNS",
    "MRCR_SCHEMA",
    "Answer",
    "Ask",
    "Assembler",
    "AssemblyError",
    "Bin",
    "BuildReport",
    "Catalog",
    "Conversation",
    "EvalConfig",
    "EvalError",
    "EvalFatal",
    "EvalItem",
    "Finding",
    "Floors",
    "FormatSpec",
    "GenerateConfig",
    "GenerateResult",
    "Message",
    "MrcrRow",
    "Needle",
    "OfflineWriter",
    "PoolError",
    "PoolTooSmall",
    "PoolWriter",
    "PoolWriting",
    "ResponsesError",
    "RowResult",
    "RunStats",
    "Sample",
    "Tokenizer",
    "TokenizerError",
    "V2Config",
    "ValidationReport",
    "ViewReport",
    "Writer",
    "Writing",
    "__version__",
    "add_analyses",
    "bin_by_upper",
    "bin_for_tokens",
    "build_pool_for_request",
    "build_pool_openai",
    "compare_runs",
    "count_tokens",
    "count_tokens_batch",
    "export_batch",
    "generate_dataset",
    "generate_sample",
    "generate_v2",
    "grade",
    "grade_lenient",
    "grade_responses",
    "grade_v2",
    "grade_v2_lenient",
    "graded_view",
    "harvest",
    "health_report",
    "import_batch",
    "iter_rows",
    "load_catalog",
    "load_tokenizer",
    "normalize_ask",
    "o200k",
    "ordinal",
    "plot_summary",
    "read_items",
    "read_pool",
    "read_v2_items",
    "render_compare",
    "render_table",
    "render_view",
    "row_floors",
    "row_token_count",
    "run_batch_async",
    "run_eval",
    "run_eval_async",
    "run_view",
    "summarize_run",
    "v2_report",
    "validate_file",
    "validate_paths",
    "validate_row",
    "write_html",
    "write_pool",
    "write_report",
    "write_rows",
]
