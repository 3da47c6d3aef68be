"""MRCR v2's own options of `mrcr-gen`, declared apart from the generator so that `mrcr-gen --help`
reads them without importing it."""

from __future__ import annotations

from ...generate._options import MODEL_WRITER_OPTIONS, GenOption

#: MRCR v2's own options of `mrcr-gen` (the shared ones are `GenerateRequest`'s fields).
OPTIONS: tuple[GenOption, ...] = (
    GenOption(
        "file_format",
        ("--format",),
        str,
        "csv",
        "mrcr-v2 only: csv (the upstream layout) or parquet (the same columns).",
    ),
    GenOption(
        "rows_per_transcript",
        ("--rows-per-transcript",),
        int,
        8,
        "mrcr-v2 only: rows drawn from one transcript at most (its (key, ordinal) pairs).",
        min=1,
    ),
    *MODEL_WRITER_OPTIONS,
)
