"""Recipe-neutral validation: findings and reports, streaming parquet rows through a recipe's row
checks in parallel, cleaning and fixing files, and the provenance a generated dataset leaves."""

from ._files import (
    ProgressCallback,
    default_workers,
    expand_paths,
    iter_validate,
    validate_file,
    validate_paths,
)
from ._findings import CHECKS, Finding, RowResult, Summary, ValidationReport, merge_reports
from ._repair import FileRepair, RepairResult, repair
from ._spec import RowChecks

__all__ = [
    "CHECKS",
    "FileRepair",
    "Finding",
    "ProgressCallback",
    "RepairResult",
    "RowChecks",
    "RowResult",
    "Summary",
    "ValidationReport",
    "default_workers",
    "expand_paths",
    "iter_validate",
    "merge_reports",
    "repair",
    "validate_file",
    "validate_paths",
]
