"""Evaluation: the official grader, reference floors, the resumable runner and its reports."""

from .._bins import bin_label
from ._auc import auc, trapezoid_auc
from ._compare import compare_runs, compare_table, plot_compare
from ._floors import Floors, row_floors
from ._grade import grade, grade_lenient
from ._items import EvalItem, FileError, ItemError, Recipe, read_items, register_recipe
from ._report import (
    plot_summary,
    print_report,
    render_table,
    summarize,
    summarize_records,
    write_report,
)
from ._responses import ResponsesError, grade_responses, read_responses
from ._runner import EvalConfig, EvalError, EvalFatal, RunStats, run_eval, run_eval_async
from ._fit import TooLong, chat_template_counter, prompt_counter, rows_over_window, server_counter
from ._runner import preflight

__all__ = [
    "EvalConfig",
    "EvalError",
    "EvalFatal",
    "EvalItem",
    "FileError",
    "Floors",
    "ItemError",
    "Recipe",
    "ResponsesError",
    "RunStats",
    "TooLong",
    "auc",
    "bin_label",
    "chat_template_counter",
    "compare_runs",
    "compare_table",
    "preflight",
    "prompt_counter",
    "rows_over_window",
    "server_counter",
    "grade",
    "grade_lenient",
    "grade_responses",
    "plot_compare",
    "plot_summary",
    "print_report",
    "read_items",
    "read_responses",
    "register_recipe",
    "render_table",
    "row_floors",
    "run_eval",
    "run_eval_async",
    "summarize",
    "summarize_records",
    "trapezoid_auc",
    "write_report",
]
