"""`mrcr-gen --recipe mrcr-v2`: the request's options checked and turned into a `V2Config`, the
writer chosen (offline, or a model's writings fetched up front) and the files generated. The
command itself only parses options and prints (`mrcr_gen.cli._gen`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from pydantic import ValidationError

from ..._budget import AssemblyError
from ..._card import FolderTaken
from ..._request import (
    EXIT_FAILED,
    Generated,
    GenerateRequest,
    ProgressBar,
    RequestError,
    check_out_folder,
    checked_tokenizer,
    option_error,
    parse_bins,
    parse_shard,
)
from ._generate import DEFAULT_V2_BUCKETS, V2_BUCKETS, V2Config, generate_v2, v2_bucket
from ._offline import V2OfflineWriter

SUMMARY_COLUMNS = ("needles", "bucket", "rows", "transcripts", "min context_len", "median", "max")


def generate(request: GenerateRequest, progress: ProgressBar) -> Generated:
    """Generate the MRCR v2 files `request` asks for; RequestError for a request it cannot meet."""
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
            format=cast(Any, request.file_format),  # checked by V2Config: csv or parquet
            rows_per_transcript=request.rows_per_transcript,
            shard=shard,
            tokenizer_spec=tokenizer,
        )
    except ValidationError as exc:
        raise RequestError(option_error(exc)) from None
    check_out_folder(config.out)
    chosen = _writer(request, tokenizer)
    total = request.samples * len(config.shard_files())
    with progress(total) as advance:
        try:
            summaries = generate_v2(
                config,
                chosen,
                command=request.command,
                on_row=lambda _: advance(1),
                on_reused=advance,
                overwrite=request.overwrite,
            )
        except (AssemblyError, FolderTaken) as exc:
            raise RequestError(str(exc)) from None
        except OSError as exc:
            raise RequestError(f"cannot write {exc.filename or config.out}: {exc.strerror or exc}") from None
    rows = [
        tuple(str(s[k]) for k in ("n_needles", "bucket", "rows", "transcripts", "min", "median", "max"))
        for s in summaries
    ]
    return Generated(title=f"MRCR v2 rows written to {config.out}", columns=SUMMARY_COLUMNS, rows=rows)


def _writer(request: GenerateRequest, tokenizer: str) -> Any:
    if request.writer == "offline":
        return V2OfflineWriter(request.seed, tokenizer=tokenizer)
    if request.writer != "openai":
        raise RequestError(f"--recipe mrcr-v2 takes --writer offline or openai, got {request.writer!r}")
    if not request.model:
        raise RequestError("--writer openai needs --model (e.g. gpt-4o, or the model your --base-url server serves)")
    from ..._openai import ChatError
    from ...pool import PoolError
    from ._llm import V2OpenAIWriter, WritingsFailed

    try:
        writer = V2OpenAIWriter(
            request.model,
            base_url=request.base_url,
            cache_dir=request.cache_dir,
            concurrency=request.concurrency or 16,
            temperature=request.temperature,
            max_tokens=request.max_tokens,
            tokenizer=tokenizer,
        )
    except PoolError as exc:  # e.g. a cache of an older mrcr-gen
        raise RequestError(str(exc)) from None
    keys = writer.catalog_keys()
    request.messages.print(
        f"requesting the catalog's {len(keys)} writings from {request.model} (cached ones are reused)"
    )
    try:
        writer.prefetch(keys)
    except ChatError as exc:
        raise RequestError(str(exc)) from None
    except WritingsFailed as exc:
        raise RequestError(str(exc), EXIT_FAILED) from None
    return writer
