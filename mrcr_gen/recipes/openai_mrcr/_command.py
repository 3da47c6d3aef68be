"""`mrcr-gen` for openai/mrcr: its options declared, the request's options checked and turned into a
`GenerateConfig`, and the writer chosen (offline, a pool, or a pool built from a model); the core
(`mrcr_gen.generate`) opens the engine and runs the job."""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..._bins import BINS
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
from ._config import DEFAULT_DATE_ADDED, GenerateConfig
from ._dataset_card import summarize
from ._fit import check_needles_fit
from ._generate import openai_job
from ._offline import OfflineWriter

SUMMARY_COLUMNS = ("needles", "bin", "rows", "min tokens", "median", "max tokens")


def plan_generation(request: GenerateRequest) -> GenerationJob:
    """The job `request` asks for, its writer chosen; RequestError for a request it cannot meet."""
    options = request.options
    try:
        config = GenerateConfig(
            needles=tuple(request.needles or (4,)),
            **({"tokens": request.tokens} if request.tokens is not None else {"bins": parse_bins(request.bins)}),
            samples=request.samples,
            seed=request.seed,
            out=request.out or Path("mrcr-data"),
            rows_per_file=options["rows_per_file"],
            shard=parse_shard(request.shard),
            date_added=options["date_added"] or DEFAULT_DATE_ADDED,
            tokenizer=checked_tokenizer(request.tokenizer),
        )
    except ValidationError as exc:
        raise RequestError(option_error(exc)) from None
    check_out_folder(config.out)
    writer_options = {k: options[k] for k in WRITER_OPTIONS}
    chosen_writer = make_writer(
        request.writer,
        request.seed,
        **writer_options,
        needles=config.needles,
        bins=config.bins,
        tokens=config.tokens,
        rows=sum(len(f.rows) for f in config.plan()),
        tokenizer=config.tokenizer,
        messages=request.messages,
    )
    # Checked by the core before anything is written, in a worker that has the tokenizer and the
    # word pools loaded already (this process would load them for the check alone).
    return replace(openai_job(config, chosen_writer), check=partial(check_needles_fit, config, chosen_writer))


WRITER_OPTIONS = (
    "pool",
    "model",
    "base_url",
    "per_pair",
    "concurrency",
    "cache_dir",
    "temperature",
    "max_tokens",
    "price_in",
    "price_out",
)


def generation_summary(job: GenerationJob, result: GenerationResult) -> Generated:
    samples = [record | {"n_needles": file.planned.info} for file in result.files for record in file.records]
    rows = [
        tuple(str(group[k]) for k in ("n_needles", "bin", "rows", "min", "median", "max"))
        for group in summarize(samples)
    ]
    return Generated(title=f"Rows written to {job.out}", columns=SUMMARY_COLUMNS, rows=rows)


def make_writer(kind: str, seed: int, **options: Any):
    """The writer for `--writer`; for pool writers, checked against the request first.

    options: pool, model, base_url, per_pair, concurrency, cache_dir, temperature, max_tokens,
    price_in, price_out (writer settings), needles, bins, tokens, rows (the request) and messages
    (the console for notes).
    """
    tokenizer = str(options.get("tokenizer") or "o200k_base")
    if kind == "offline":
        return OfflineWriter(seed, tokenizer=tokenizer)
    if kind not in ("pool", "openai"):
        raise RequestError(f"unknown writer {kind!r}; choose offline, pool or openai")
    from ...pool import PoolError, PoolTooSmall, PoolWriter
    from ._shortcut import check_pool, pool_requirements

    needles = tuple(options.get("needles") or (4,))
    max_tokens, where = pool_requirements(needles, options.get("bins") or BINS, options.get("tokens"))
    try:
        if kind == "openai":  # a pool built (or reused from the cache) for this request, already checked
            return PoolWriter.from_file(_build_openai_pool(seed, needles, max_tokens, where, options), tokenizer)
        if options.get("pool") is None:
            raise RequestError("--writer pool needs --pool PATH (a pool from `mrcr-gen pool harvest` or `pool build`)")
        pool_writer = PoolWriter.from_file(Path(options["pool"]), tokenizer)
        check_pool(pool_writer, needles, max_tokens, where)
    except (PoolError, PoolTooSmall) as exc:
        raise RequestError(str(exc)) from None
    return pool_writer


def _build_openai_pool(seed: int, needles: tuple, max_tokens: int, where: str, options: dict) -> Path:
    """`build_pool_for_request` with the --writer openai options, its summaries on the messages console."""
    from ..._prices import PriceError
    from ._pool_llm import BuildError, print_build_report
    from ._shortcut import WritingsFailed, build_pool_for_request

    if not options.get("model"):
        raise RequestError("--writer openai needs --model (e.g. gpt-4o, or the model your --base-url server serves)")
    messages = options["messages"]
    try:
        return build_pool_for_request(
            model=options["model"],
            seed=seed,
            needles=needles,
            max_tokens=max_tokens,
            where=where,
            rows=int(options.get("rows") or 1),  # of the whole dataset (every shard), so shards plan alike
            cache_dir=options.get("cache_dir"),
            pool_path=options.get("pool"),
            per_pair=int(options.get("per_pair") or 1),
            concurrency=int(options.get("concurrency") or 16),
            base_url=options.get("base_url"),
            temperature=options.get("temperature"),
            max_tokens_per_writing=options.get("max_tokens"),
            price_in=options.get("price_in"),
            price_out=options.get("price_out"),
            console=messages,
            on_report=lambda report: print_build_report(report, messages),
        )
    except WritingsFailed as exc:
        raise RequestError(str(exc), EXIT_FAILED) from None
    except (BuildError, PriceError) as exc:
        raise RequestError(str(exc)) from None
