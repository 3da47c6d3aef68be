"""`mrcr-gen --recipe mrcr-v2`: its options declared, the request's options checked and turned into
a `V2Config`, and the writer chosen (offline, or a model's writings fetched up front); the core
(`mrcr_gen.generate`) opens the engine and runs the job."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, cast

from pydantic import ValidationError

from ..._errors import EXIT_FAILED, RequestError
from ...generate import (
    Generated,
    GenerateRequest,
    GenerationJob,
    GenerationResult,
    check_out_folder,
    checked_tokenizer,
    option_error,
    parse_bins,
    parse_shard,
)
from ._generate import DEFAULT_V2_BUCKETS, V2_BUCKETS, V2Config, file_summary, v2_bucket, v2_job
from ._offline import V2OfflineWriter

SUMMARY_COLUMNS = ("needles", "bucket", "rows", "transcripts", "min context_len", "median", "max")


def plan_generation(request: GenerateRequest) -> GenerationJob:
    """The job `request` asks for, its writer chosen; RequestError for a request it cannot meet."""
    options = request.options
    shard = parse_shard(request.shard)
    tokenizer = checked_tokenizer(request.tokenizer)
    try:
        config = V2Config(
            needles=tuple(request.needles or (8,)),
            buckets=parse_bins(request.bins, v2_bucket, DEFAULT_V2_BUCKETS, V2_BUCKETS),
            tokens=request.tokens,
            samples=request.samples,
            seed=request.seed,
            out=request.out or Path("mrcr-v2-data"),
            format=cast(Any, options["file_format"]),  # checked by V2Config: csv or parquet
            rows_per_transcript=options["rows_per_transcript"],
            shard=shard,
            tokenizer_spec=tokenizer,
        )
    except ValidationError as exc:
        raise RequestError(option_error(exc)) from None
    check_out_folder(config.out)
    return v2_job(config, _writer(request, tokenizer))


def one_unit(request: GenerateRequest) -> GenerateRequest:
    """`request` on one local worker when this shard is at most one file: a file is one unit of
    work, run in this process, so a pool's processes (and their fork server, which imports the
    recipe and builds o200k again) would only take a core from the tokenizer threads. The files
    are the same whatever the workers."""
    if request.engine != "local" or request.workers == 1:
        return request
    try:
        targets = (
            1
            if request.tokens is not None
            else len(parse_bins(request.bins, v2_bucket, DEFAULT_V2_BUCKETS, V2_BUCKETS))
        )
        index, count = parse_shard(request.shard)
    except RequestError:  # refused with its reason when the job is planned
        return request
    files = len(set(request.needles or (8,))) * targets
    return replace(request, workers=1) if len(range(index - 1, files, count)) <= 1 else request


def generation_summary(job: GenerationJob, result: GenerationResult) -> Generated:
    summaries = [file_summary(file) for file in result.files]
    rows = [
        tuple(str(s[k]) for k in ("n_needles", "bucket", "rows", "transcripts", "min", "median", "max"))
        for s in summaries
    ]
    return Generated(title=f"MRCR v2 rows written to {job.out}", columns=SUMMARY_COLUMNS, rows=rows)


def _writer(request: GenerateRequest, tokenizer: str) -> Any:
    options = request.options
    if options["no_wait"] and not options["batch"]:
        raise RequestError("--no-wait goes with --batch")
    if options["batch"] and request.writer != "openai":
        raise RequestError("--batch goes with --writer openai (the offline writer sends nothing)")
    if options["batch"] and options["concurrency"] is not None:
        raise RequestError("--concurrency has no meaning with --batch (the Batch API runs the requests)")
    if request.writer == "offline":
        return V2OfflineWriter(request.seed, tokenizer=tokenizer)
    if request.writer != "openai":
        raise RequestError(f"--recipe mrcr-v2 takes --writer offline or openai, got {request.writer!r}")
    if not options["model"]:
        raise RequestError("--writer openai needs --model (e.g. gpt-4o, or the model your --base-url server serves)")
    from ..._openai import ChatError
    from ...pool import PoolError
    from ._llm import V2OpenAIWriter, WritingsFailed, WritingsPending

    try:
        writer = V2OpenAIWriter(
            options["model"],
            base_url=options["base_url"],
            cache_dir=options["cache_dir"],
            concurrency=options["concurrency"] or 16,
            temperature=options["temperature"],
            max_tokens=options["max_tokens"],
            tokenizer=tokenizer,
            batch=options["batch"],
            wait=not options["no_wait"],
        )
    except PoolError as exc:  # e.g. a cache of an older mrcr-gen
        raise RequestError(str(exc)) from None
    keys = writer.catalog_keys()
    request.messages.print(
        f"requesting the catalog's {len(keys)} writings from {options['model']} (cached ones are reused)"
    )
    try:
        writer.prefetch(keys)
    except (ChatError, PoolError) as exc:  # PoolError: a batches folder another command holds
        raise RequestError(str(exc)) from None
    except (WritingsFailed, WritingsPending) as exc:
        raise RequestError(str(exc), EXIT_FAILED) from None
    return writer
