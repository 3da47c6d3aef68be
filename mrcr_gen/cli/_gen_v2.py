"""`mrcr-gen --recipe mrcr-v2`: generate MRCR v2 files (the options are parsed by `_gen`)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from .._budget import AssemblyError
from ._common import CommandError, generating_progress, stderr


def _buckets(values: list[str]) -> tuple:
    from ..recipes.mrcr_v2._generate import DEFAULT_V2_BUCKETS, V2_BUCKETS, v2_bucket
    from ._gen import parse_bins

    return parse_bins(values, v2_bucket, DEFAULT_V2_BUCKETS, V2_BUCKETS)


def _writer(kind: str, seed: int, tokenizer: str, **options):
    from ..recipes.mrcr_v2._offline import V2OfflineWriter

    if kind == "offline":
        return V2OfflineWriter(seed, tokenizer=tokenizer)
    if kind != "openai":
        raise CommandError(f"--recipe mrcr-v2 takes --writer offline or openai, got {kind!r}")
    if not options.get("model"):
        raise CommandError("--writer openai needs --model (e.g. gpt-4o, or the model your --base-url server serves)")
    from .._openai import ChatError
    from ..recipes.mrcr_v2._llm import V2OpenAIWriter, WritingsFailed

    writer = V2OpenAIWriter(
        options["model"],
        base_url=options.get("base_url"),
        cache_dir=options.get("cache_dir"),
        concurrency=options.get("concurrency") or 16,
        temperature=options.get("temperature"),
        max_tokens=options.get("max_tokens"),
        tokenizer=tokenizer,
    )
    keys = writer.catalog_keys()
    stderr.print(f"requesting the catalog's {len(keys)} writings from {options['model']} (cached ones are reused)")
    try:
        writer.prefetch(keys)
    except ChatError as exc:
        raise CommandError(str(exc)) from None
    except WritingsFailed as exc:
        raise CommandError(str(exc), 1) from None
    return writer


def generate_v2_command(
    *,
    needles,
    bins,
    tokens,
    samples,
    seed,
    out,
    file_format,
    rows_per_transcript,
    shard,
    writer,
    tokenizer="o200k_base",
    **options,
) -> None:
    from ..recipes.mrcr_v2._generate import V2Config, generate_v2

    try:
        config = V2Config(
            needles=tuple(needles or [8]),
            buckets=_buckets(bins),
            tokens=tokens,
            samples=samples,
            seed=seed,
            out=out or Path("mrcr-v2-data"),
            format=file_format,
            rows_per_transcript=rows_per_transcript,
            shard=shard,
            tokenizer_spec=tokenizer,
        )
    except ValidationError as exc:
        from ._gen import _option_error

        raise CommandError(_option_error(exc)) from None
    chosen = _writer(writer, seed, tokenizer, **options)
    total = samples * len(config.shard_files())
    command = shlex.join(["mrcr-gen", *sys.argv[1:]])
    with generating_progress() as progress:
        task = progress.add_task("rows", total=total)
        try:
            summaries = generate_v2(
                config,
                chosen,
                command=command,
                on_row=lambda _: progress.advance(task),
                on_reused=lambda rows: progress.advance(task, rows),
            )
        except AssemblyError as exc:
            raise CommandError(str(exc)) from None
        except OSError as exc:
            raise CommandError(f"cannot write {exc.filename or config.out}: {exc.strerror or exc}") from None
    table = Table(title=f"MRCR v2 rows written to {config.out}")
    for column in ("needles", "bucket", "rows", "transcripts", "min context_len", "median", "max"):
        table.add_column(column, justify="right")
    for s in summaries:
        table.add_row(*(str(s[k]) for k in ("n_needles", "bucket", "rows", "transcripts", "min", "median", "max")))
    Console().print(table)
