"""Validation of MRCR parquet files: row checks, streaming file validation, repair."""

from ._checks import analyze_row, check_row, normalize_ask, validate_row
from ._files import (
    default_workers,
    expand_paths,
    iter_validate,
    validate_file,
    validate_paths,
)
from ._findings import CHECKS, Finding, RowResult, Summary, ValidationReport
from ._repair import FileRepair, RepairResult, repair

__all__ = [
    "CHECKS",
    "FileRepair",
    "Finding",
    "RepairResult",
    "RowResult",
    "Summary",
    "ValidationReport",
    "analyze_row",
    "check_row",
    "default_workers",
    "expand_paths",
    "iter_validate",
    "normalize_ask",
    "repair",
    "validate_file",
    "validate_paths",
    "validate_row",
]
