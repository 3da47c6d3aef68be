"""The recipe-neutral generation core: one pipeline for every recipe (work units and their chunks
on an engine, shared writings, joins, atomic publishing, sidecars, resume, one generation per
folder, the dataset card's frame) and what a recipe supplies to it (`GenerationRecipe`)."""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .._card import shard_card_name
    from ._card import card_header, in_progress_card, planned_names
    from ._chunks import (
        BYTES_PER_TOKEN,
        GROUP_BYTES,
        MIN_UNIT_BYTES,
        UNIT_BYTES,
        UNITS_PER_WORKER,
        RowChunk,
        plan_chunks,
        row_groups,
        split_rows,
    )
    from ._job import (
        CardFrame,
        FileBuilder,
        FileJoin,
        FileSink,
        GenerationJob,
        GenerationResult,
        PlannedFile,
        RowBatch,
        WrittenFile,
    )
    from ._options import MODEL_WRITER_OPTIONS, GenOption, option_values
    from ._pipeline import JOIN_SLACK, FileFailed, run_job
    from ._recipe import GenerationDefaults, GenerationRecipe, generate_for, start_workers_early
    from ._request import (
        Generated,
        GenerateRequest,
        ProgressBar,
        check_out_folder,
        checked_tokenizer,
        open_engine,
        option_error,
        parse_bins,
        parse_shard,
    )
    from ._rowjob import BuildRow, RowBuilder, RowSpec, row_job
    from ._units import ChunkUnit, Join, JoinUnit, join_parts, write_chunk

# Each name is imported on first use: a command imports only what it uses (its start stays fast).
__getattr__ = lazy_exports(
    __name__,
    {
        **dict.fromkeys(["shard_card_name"], ".._card"),
        **dict.fromkeys(["card_header", "in_progress_card", "planned_names"], "._card"),
        **dict.fromkeys(
            [
                "BYTES_PER_TOKEN",
                "GROUP_BYTES",
                "MIN_UNIT_BYTES",
                "RowChunk",
                "UNITS_PER_WORKER",
                "UNIT_BYTES",
                "plan_chunks",
                "row_groups",
                "split_rows",
            ],
            "._chunks",
        ),
        **dict.fromkeys(
            [
                "CardFrame",
                "FileBuilder",
                "FileJoin",
                "FileSink",
                "GenerationJob",
                "GenerationResult",
                "PlannedFile",
                "RowBatch",
                "WrittenFile",
            ],
            "._job",
        ),
        **dict.fromkeys(["GenOption", "MODEL_WRITER_OPTIONS", "option_values"], "._options"),
        **dict.fromkeys(["FileFailed", "JOIN_SLACK", "run_job"], "._pipeline"),
        **dict.fromkeys(["GenerationDefaults", "GenerationRecipe", "generate_for", "start_workers_early"], "._recipe"),
        **dict.fromkeys(
            [
                "GenerateRequest",
                "Generated",
                "ProgressBar",
                "check_out_folder",
                "checked_tokenizer",
                "open_engine",
                "option_error",
                "parse_bins",
                "parse_shard",
            ],
            "._request",
        ),
        **dict.fromkeys(["BuildRow", "RowBuilder", "RowSpec", "row_job"], "._rowjob"),
        **dict.fromkeys(["ChunkUnit", "Join", "JoinUnit", "join_parts", "write_chunk"], "._units"),
    },
)

__all__ = [
    "BYTES_PER_TOKEN",
    "GROUP_BYTES",
    "JOIN_SLACK",
    "MIN_UNIT_BYTES",
    "MODEL_WRITER_OPTIONS",
    "UNITS_PER_WORKER",
    "UNIT_BYTES",
    "BuildRow",
    "CardFrame",
    "ChunkUnit",
    "FileBuilder",
    "FileFailed",
    "FileJoin",
    "FileSink",
    "GenOption",
    "GenerateRequest",
    "Generated",
    "GenerationDefaults",
    "GenerationJob",
    "GenerationRecipe",
    "GenerationResult",
    "Join",
    "JoinUnit",
    "PlannedFile",
    "ProgressBar",
    "RowBatch",
    "RowBuilder",
    "RowChunk",
    "RowSpec",
    "WrittenFile",
    "card_header",
    "check_out_folder",
    "checked_tokenizer",
    "generate_for",
    "in_progress_card",
    "join_parts",
    "open_engine",
    "option_error",
    "option_values",
    "parse_bins",
    "parse_shard",
    "plan_chunks",
    "planned_names",
    "row_groups",
    "row_job",
    "run_job",
    "shard_card_name",
    "split_rows",
    "start_workers_early",
    "write_chunk",
]
