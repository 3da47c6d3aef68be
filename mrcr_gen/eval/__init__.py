"""Recipe-neutral evaluation: items, the resumable runner, results, summaries, AUC, compare and plots.
What a row sends and how its reply is graded is the recipe's (`mrcr_gen.recipes`)."""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .._bins import bin_label
    from ..batch import BatchLimits
    from ._analysis import RowAnalysis, Transcript, Writing, analyse_reply
    from ._auc import auc, trapezoid_auc
    from ._batch import BatchStats, run_batch_async
    from ._batchfile import ExportStats, ImportStats, export_requests, import_results, request_line
    from ._compare import compare_runs, compare_table, plot_compare
    from ._compare_view import render_compare
    from ._config import EvalConfig, EvalError, EvalFatal
    from ._failures import analyse_item, failure_summary, write_failure_plots
    from ._fit import TooLong, chat_template_counter, prompt_counter, rows_over_window, server_counter
    from ._items import EvalItem, EvalRecipe, FileError, ItemError, read_items
    from ._plots import plot_summary
    from ._report import print_report, render_table, summarize, summarize_records, write_report
    from ._responses import ResponsesError, grade_responses, read_responses
    from ._run_view import add_analyses, graded_view, records_view, run_view, view_samples
    from ._runner import RunStats, preflight, run_eval, run_eval_async
    from ._view import ViewReport, ViewSample, render_view, write_html

# Each name is imported on first use: a command imports only what it uses (its start stays fast).
__getattr__ = lazy_exports(
    __name__,
    {
        **dict.fromkeys(["bin_label"], ".._bins"),
        **dict.fromkeys(["BatchLimits"], "..batch"),
        **dict.fromkeys(["RowAnalysis", "Transcript", "Writing", "analyse_reply"], "._analysis"),
        **dict.fromkeys(["auc", "trapezoid_auc"], "._auc"),
        **dict.fromkeys(["BatchStats", "run_batch_async"], "._batch"),
        **dict.fromkeys(
            ["ExportStats", "ImportStats", "export_requests", "import_results", "request_line"], "._batchfile"
        ),
        **dict.fromkeys(["compare_runs", "compare_table", "plot_compare"], "._compare"),
        **dict.fromkeys(["render_compare"], "._compare_view"),
        **dict.fromkeys(["EvalConfig", "EvalError", "EvalFatal"], "._config"),
        **dict.fromkeys(["analyse_item", "failure_summary", "write_failure_plots"], "._failures"),
        **dict.fromkeys(
            ["TooLong", "chat_template_counter", "prompt_counter", "rows_over_window", "server_counter"], "._fit"
        ),
        **dict.fromkeys(["EvalItem", "EvalRecipe", "FileError", "ItemError", "read_items"], "._items"),
        **dict.fromkeys(
            ["print_report", "render_table", "summarize", "summarize_records", "write_report"],
            "._report",
        ),
        **dict.fromkeys(["plot_summary"], "._plots"),
        **dict.fromkeys(["ResponsesError", "grade_responses", "read_responses"], "._responses"),
        **dict.fromkeys(["add_analyses", "graded_view", "records_view", "run_view", "view_samples"], "._run_view"),
        **dict.fromkeys(["RunStats", "preflight", "run_eval", "run_eval_async"], "._runner"),
        **dict.fromkeys(["ViewReport", "ViewSample", "render_view", "write_html"], "._view"),
    },
)

__all__ = [
    "BatchLimits",
    "BatchStats",
    "EvalConfig",
    "EvalError",
    "EvalFatal",
    "EvalItem",
    "EvalRecipe",
    "ExportStats",
    "FileError",
    "ImportStats",
    "ItemError",
    "ResponsesError",
    "RowAnalysis",
    "RunStats",
    "TooLong",
    "Transcript",
    "ViewReport",
    "ViewSample",
    "Writing",
    "add_analyses",
    "analyse_item",
    "analyse_reply",
    "auc",
    "bin_label",
    "chat_template_counter",
    "compare_runs",
    "compare_table",
    "export_requests",
    "failure_summary",
    "grade_responses",
    "graded_view",
    "import_results",
    "plot_compare",
    "plot_summary",
    "preflight",
    "print_report",
    "prompt_counter",
    "read_items",
    "read_responses",
    "records_view",
    "render_compare",
    "render_table",
    "render_view",
    "request_line",
    "rows_over_window",
    "run_batch_async",
    "run_eval",
    "run_eval_async",
    "run_view",
    "server_counter",
    "summarize",
    "summarize_records",
    "trapezoid_auc",
    "view_samples",
    "write_failure_plots",
    "write_html",
    "write_report",
]
