"""Evaluation: the official grader, reference floors, the resumable runner and its reports."""

from .._bins import bin_label
from ._data import RowInfo
from ._floors import Floors, row_floors
from ._grade import grade, grade_lenient
from ._report import (
    plot_summary,
    print_report,
    render_table,
    summarize,
    summarize_records,
    write_report,
)
from ._responses import ResponsesError, grade_responses, read_responses
from ._runner import EvalConfig, EvalError, RunStats, run_eval, run_eval_async
from ._fit import TooLong, chat_template_counter, prompt_counter, rows_over_window, server_counter
from ._runner import preflight

__all__ = [
    "EvalConfig",
    "EvalError",
    "Floors",
    "ResponsesError",
    "RowInfo",
    "RunStats",
    "TooLong",
    "bin_label",
    "chat_template_counter",
    "preflight",
    "prompt_counter",
    "rows_over_window",
    "server_counter",
    "grade",
    "grade_lenient",
    "grade_responses",
    "plot_summary",
    "print_report",
    "read_responses",
    "render_table",
    "row_floors",
    "run_eval",
    "run_eval_async",
    "summarize",
    "summarize_records",
    "write_report",
]
