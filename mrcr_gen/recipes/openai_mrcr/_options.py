"""openai/mrcr's own options of `mrcr-gen`, declared apart from the generator so that `mrcr-gen --help`
reads them without importing it."""

from __future__ import annotations

from pathlib import Path

from ...generate._options import MODEL_WRITER_OPTIONS, GenOption

# Fixed so that the same command and seed give byte-identical files on any day.
DEFAULT_DATE_ADDED = "12-02-2026"


ROWS_PER_FILE = 400


#: openai/mrcr's own options of `mrcr-gen` (the shared ones are `GenerateRequest`'s fields).
OPTIONS: tuple[GenOption, ...] = (
    GenOption(
        "pool", ("--pool",), Path | None, None, "Pool parquet file: read by --writer pool, written by --writer openai."
    ),
    MODEL_WRITER_OPTIONS[0],
    MODEL_WRITER_OPTIONS[1],
    GenOption("per_pair", ("--per-pair",), int, 1, "--writer openai: writings per distractor ask.", min=1),
    *MODEL_WRITER_OPTIONS[2:],
    GenOption(
        "price_in", ("--price-in",), float | None, None, "--writer openai: USD per 1M prompt tokens (cost estimate)."
    ),
    GenOption("price_out", ("--price-out",), float | None, None, "--writer openai: USD per 1M completion tokens."),
    GenOption(
        "rows_per_file",
        ("--rows-per-file",),
        int,
        ROWS_PER_FILE,
        "Rows per parquet file ({n}needle_{k}.parquet).",
        min=1,
    ),
    GenOption("date_added", ("--date-added",), str, DEFAULT_DATE_ADDED, "date_added column (MM-DD-YYYY)."),
)
