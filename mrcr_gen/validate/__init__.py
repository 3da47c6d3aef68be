"""Recipe-neutral validation: one pipeline streaming a file's rows (parquet, or whatever the recipe's
reader reads) to the recipe's checker, in parallel row ranges when the recipe allows it; findings
and reports; cleaning and fixing files; the provenance a generated dataset leaves (its sidecars)."""

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
