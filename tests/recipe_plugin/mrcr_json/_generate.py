"""mrcr-json's generation part: the core's job for rows built one at a time (`mrcr_gen.generate.row_job`)."""

from __future__ import annotations

from mrcr_gen._errors import RequestError
from mrcr_gen.generate import GenerateRequest, GenerationJob, row_job

from ._answers import NAME
from ._rows import SCHEMA, JsonWriter, build_row

VERSION = "1"


def plan(request: GenerateRequest) -> GenerationJob:
    """`samples` rows per needle count and bin, from the offline writer (no --tokens, no other writer)."""
    if request.tokens is not None or request.writer != "offline":
        raise RequestError(f"--recipe {NAME} takes neither --tokens nor a --writer other than offline")
    return row_job(request, recipe=NAME, version=VERSION, schema=SCHEMA, build=build_row, writer=JsonWriter)
