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
    GenOption(
        "batch",
        ("--batch",),
        bool,
        False,
        "mrcr-v2 --writer openai: the writings the cache lacks through the OpenAI Batch API (half the price); "
        "rerun the same command to collect them.",
    ),
    GenOption(
        "no_wait",
        ("--no-wait",),
        bool,
        False,
        "mrcr-v2 --writer openai --batch: submit the batches, collect what ended, exit 1 while they run.",
    ),
)
