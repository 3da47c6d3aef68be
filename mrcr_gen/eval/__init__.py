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

__all__ = [
    "EvalConfig",
    "EvalError",
    "Floors",
    "ResponsesError",
    "RowInfo",
    "RunStats",
    "bin_label",
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
