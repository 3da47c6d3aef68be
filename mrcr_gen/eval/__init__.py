"""Recipe-neutral evaluation: items, the resumable runner, results, summaries, AUC, compare and plots.
What a row sends and how its reply is graded is the recipe's (`mrcr_gen.recipes`)."""

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
from ._report import plot_summary, print_report, render_table, summarize, summarize_records, write_report
from ._responses import ResponsesError, grade_responses, read_responses
from ._run_view import add_analyses, graded_view, records_view, run_view, view_samples
from ._runner import RunStats, preflight, run_eval, run_eval_async
from ._view import ViewReport, ViewSample, render_view, write_html

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
