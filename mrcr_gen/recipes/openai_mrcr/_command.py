"""`mrcr-gen` for openai/mrcr: the request's options checked and turned into a `GenerateConfig`, the
writer chosen (offline, a pool, or a pool built from a model), the engine opened and the dataset
generated. The command itself only parses options and prints (`mrcr_gen.cli._gen`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..._bins import BINS
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
    open_engine,
    option_error,
    parse_bins,
    parse_shard,
)
from ._config import DEFAULT_DATE_ADDED, GenerateConfig
from ._dataset_card import summarize
from ._fit import check_needles_fit
from ._generate import FileFailed, generate_dataset, worker_preload
from ._offline import OfflineWriter

SUMMARY_COLUMNS = ("needles", "bin", "rows", "min tokens", "median", "max tokens")


def generate(request: GenerateRequest, progress: ProgressBar) -> Generated:
    """Generate the dataset `request` asks for; RequestError for a request it cannot meet."""
    out = request.out or Path("mrcr-data")
    needles = request.needles or (4,)
    # A local engine's workers start loading now, while the job is prepared (Ray starts later:
    # a usage error must not wait for a cluster).
    preload = worker_preload(request.tokenizer)
    runner = (
        open_engine(request.engine, request.workers, request.address, preload=preload)
        if request.engine == "local"
        else None
    )
    try:
        config = GenerateConfig(
            needles=tuple(needles),
            **({"tokens": request.tokens} if request.tokens is not None else {"bins": parse_bins(request.bins)}),
            samples=request.samples,
            seed=request.seed,
            out=out,
            rows_per_file=request.rows_per_file,
            shard=parse_shard(request.shard),
            date_added=request.date_added or DEFAULT_DATE_ADDED,
            tokenizer=checked_tokenizer(request.tokenizer),
        )
    except ValidationError as exc:
        raise RequestError(option_error(exc)) from None
    check_out_folder(config.out)
    total = sum(len(f.rows) for f in config.shard_plan())
    chosen_writer = make_writer(
        request.writer,
        request.seed,
        pool=request.pool,
        model=request.model,
        base_url=request.base_url,
        per_pair=request.per_pair,
        concurrency=request.concurrency,
        cache_dir=request.cache_dir,
        temperature=request.temperature,
        max_tokens=request.max_tokens,
        price_in=request.price_in,
        price_out=request.price_out,
        needles=config.needles,
        bins=config.bins,
        tokens=config.tokens,
        rows=sum(len(f.rows) for f in config.plan()),
        tokenizer=config.tokenizer,
        messages=request.messages,
    )
    try:
        for note in check_needles_fit(config, chosen_writer):
            request.messages.print(f"note: {note}", markup=False, highlight=False)
    except AssemblyError as exc:
        raise RequestError(str(exc)) from None
    runner = runner or open_engine(request.engine, request.workers, request.address, preload=preload)
    with runner, progress(total) as advance:
        try:
            result = generate_dataset(
                config,
                chosen_writer,
                command=request.command,
                engine=runner,
                on_rows=advance,
                on_reused=advance,
                overwrite=request.overwrite,
            )
        except (AssemblyError, FolderTaken) as exc:
            raise RequestError(str(exc)) from None
        except FileFailed as exc:
            raise RequestError(str(exc), EXIT_FAILED) from None
        except OSError as exc:  # e.g. --out names a file, or a directory we may not write to
            raise RequestError(f"cannot write {exc.filename or config.out}: {exc.strerror or exc}") from None
    rows = [
        tuple(str(group[k]) for k in ("n_needles", "bin", "rows", "min", "median", "max"))
        for group in summarize(result.samples)
    ]
    return Generated(title=f"Rows written to {config.out}", columns=SUMMARY_COLUMNS, rows=rows)


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
