"""The one batch machinery of mrcr-gen, recipe-neutral: request lines keyed by `custom_id` split
into Batch API batches, submitted, polled and collected with a crash-safe record (`BatchFolder`),
and the one reader of batch output files (`read_output`). `mrcr-eval --batch` and
`mrcr-eval batch import` consume it (mrcr_gen/eval/_batch.py, _batchfile.py); so can pools."""

from ._folder import MAX_BATCH_BYTES, MAX_BATCH_REQUESTS, STATE_NAME, BatchFolder, BatchLimits, Ended, Part, PartWriter
from ._lines import (
    BATCH_FAILED,
    CHAT_URL,
    EXPIRED,
    NOT_IN_RESULTS,
    TOO_LARGE,
    BatchError,
    Outcome,
    OutputRead,
    encoded_line,
    outcome_of,
    read_output,
    read_outputs,
    reply_models,
    request_line,
    same_model,
)

__all__ = [
    "BATCH_FAILED",
    "CHAT_URL",
    "EXPIRED",
    "MAX_BATCH_BYTES",
    "MAX_BATCH_REQUESTS",
    "NOT_IN_RESULTS",
    "STATE_NAME",
    "TOO_LARGE",
    "BatchError",
    "BatchFolder",
    "BatchLimits",
    "Ended",
    "Outcome",
    "OutputRead",
    "Part",
    "PartWriter",
    "encoded_line",
    "outcome_of",
    "read_output",
    "read_outputs",
    "reply_models",
    "request_line",
    "same_model",
]
