"""Recipe-neutral validation: one pipeline streaming a file's rows (parquet, or whatever the recipe's
reader reads) to the recipe's checker, in parallel row ranges when the recipe allows it; findings
and reports; cleaning and fixing files; the provenance a generated dataset leaves (its sidecars)."""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from ._files import (
        ProgressCallback,
        default_workers,
        expand_paths,
        iter_validate,
        validate_paths,
    )
    from ._findings import Finding, RowResult, Summary, ValidationReport, merge_reports
    from ._parquet_rows import ParquetRows, read_range
    from ._recipe import CheckingDefaults, CheckingRecipe, RepairRefused, ValidateOptions, validate_inputs
    from ._repair import FileRepair, RepairResult, repair
    from ._spec import Batch, CheckContext, CheckSpec, FileScan, RowChecker, RowReader, RowWriter
    from ._truth import GroundTruth, Truth, TruthChecker

# Each name is imported on first use: a command imports only what it uses (its start stays fast).
__getattr__ = lazy_exports(
    __name__,
    {
        **dict.fromkeys(
            ["ProgressCallback", "default_workers", "expand_paths", "iter_validate", "validate_paths"], "._files"
        ),
        **dict.fromkeys(["Finding", "RowResult", "Summary", "ValidationReport", "merge_reports"], "._findings"),
        **dict.fromkeys(["ParquetRows", "read_range"], "._parquet_rows"),
        **dict.fromkeys(
            ["CheckingDefaults", "CheckingRecipe", "RepairRefused", "ValidateOptions", "validate_inputs"], "._recipe"
        ),
        **dict.fromkeys(["FileRepair", "RepairResult", "repair"], "._repair"),
        **dict.fromkeys(
            ["Batch", "CheckContext", "CheckSpec", "FileScan", "RowChecker", "RowReader", "RowWriter"], "._spec"
        ),
        **dict.fromkeys(["GroundTruth", "Truth", "TruthChecker"], "._truth"),
    },
)

__all__ = [
    "Batch",
    "CheckContext",
    "CheckSpec",
    "CheckingDefaults",
    "CheckingRecipe",
    "FileRepair",
    "FileScan",
    "Finding",
    "GroundTruth",
    "ParquetRows",
    "ProgressCallback",
    "RepairRefused",
    "RepairResult",
    "RowChecker",
    "RowReader",
    "RowResult",
    "RowWriter",
    "Summary",
    "Truth",
    "TruthChecker",
    "ValidateOptions",
    "ValidationReport",
    "default_workers",
    "expand_paths",
    "iter_validate",
    "merge_reports",
    "read_range",
    "repair",
    "validate_inputs",
    "validate_paths",
]
