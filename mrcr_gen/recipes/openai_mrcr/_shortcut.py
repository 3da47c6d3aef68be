"""`--writer openai`: plan, build and cache a pool just large enough for one generation request.

`build_pool_for_request` chooses how many asks to have the model write (the first ones of the
seeded catalog order get enough writings to serve as needles), grows that number until the pool
holds enough distinct tokens for the request, and keeps the pool in the cache under a digest of
the settings, so the same request reuses it (and a rerun sends no request at all).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from rich.console import Console

from ..._bins import Bin
from ..._budget import AssemblyError
from ..._models import Ask
from ...pool._cache import default_cache_dir
from ...pool._pool import PoolError, PoolTooSmall, PoolWriter
from ._assembler import Assembler
from ._catalog import load_catalog
from ._pool_llm import (
    DEFAULT_CONCURRENCY,
    BuildError,
    BuildReport,
    build_pool_openai,
    plan_asks,
    price_for,
    writing_params,
)

MAX_NEEDLE_ASKS = 32  # asks written often enough to be needles, at most
MIN_NEEDLE_ASKS = 2  # the preamble's worked example needs an ask with 2 writings besides the needle ask
MAX_ROUNDS = 8  # builds, each adding asks, before giving up on reaching the token total


class WritingsFailed(BuildError):
    """Some writings failed (retries exhausted); the finished ones are cached, so a rerun resumes."""

    def __init__(self, report: BuildReport) -> None:
        super().__init__(f"{len(report.failed)} writings failed; rerun to retry them (finished ones are cached)")
        self.report = report


def request_plan(
    *, seed: int, needles: Iterable[int], max_tokens: int, rows: int, per_pair: int = 1
) -> tuple[list[tuple[Ask, int]], int, int]:
    """(every catalog ask with its writings to write, in the seeded order; asks to start with; needle asks).

    The first `needle asks` asks get max(largest needle count, 2, per_pair) writings: one per row
    (up to 32) so rows vary their needle ask, and never fewer than 2, because the preamble's worked
    example needs another ask with 2 distinct writings besides the needle ask. The rest get
    `per_pair`. The start count covers the needle asks, at least one distractor ask, and ~110% of
    `max_tokens` estimated from the catalog's median writing lengths.
    """
    needles = tuple(needles)
    order = plan_asks(seed=seed, per_pair=per_pair)  # every catalog ask, in a seeded order
    needle_asks = min(max(rows, MIN_NEEDLE_ASKS), MAX_NEEDLE_ASKS, len(order))
    needle_variants = max(max(needles), 2, per_pair)
    plan = [(ask, needle_variants if i < needle_asks else per_pair) for i, ask in enumerate(order)]
    medians = {spec.name: spec.tokens.median for spec in load_catalog().formats}
    wanted, count, estimate = int(max_tokens * 1.1), 0, 0
    while count < len(plan) and (count < needle_asks + 1 or estimate < wanted):
        ask, copies = plan[count]
        estimate += copies * medians.get(ask.format, 300)
        count += 1
    return plan, count, needle_asks


def default_pool_path(cache_dir: str | os.PathLike, model: str, settings: tuple) -> Path:
    """`{cache_dir}/pools/{model slug}-{digest of the settings}.parquet`."""
    digest = hashlib.sha256(repr(settings).encode()).hexdigest()[:12]
    slug = "".join(c if c.isalnum() or c in "-._" else "_" for c in str(model))
    return Path(cache_dir) / "pools" / f"{slug}-{digest}.parquet"


def repeated_asks(pool: PoolWriter, plan: Mapping[Ask, int]) -> list[tuple[Ask, int, int]]:
    """(ask, distinct writings in the pool, writings requested) for asks the model repeated itself on."""
    return [(ask, pool.n_variants(ask), wanted) for ask, wanted in plan.items() if pool.n_variants(ask) < wanted]


def build_pool_for_request(
    *,
    model: str,
    seed: int = 0,
    needles: Iterable[int] = (4,),
    max_tokens: int,
    rows: int = 1,
    where: str | None = None,
    cache_dir: str | os.PathLike | None = None,
    pool_path: str | os.PathLike | None = None,
    per_pair: int = 1,
    concurrency: int = DEFAULT_CONCURRENCY,
    base_url: str | None = None,
    temperature: float | None = None,
    max_tokens_per_writing: int | None = None,
    price_in: float | None = None,
    price_out: float | None = None,
    api_key: str | None = None,
    timeout: float = 600.0,
    console: Console | None = None,
    progress: bool = True,
    on_report: Callable[[BuildReport], None] | None = None,
) -> Path:
    """Build (or reuse from the cache) a pool that can fill the request; its path.

    The request: rows with `needles` needles each, up to `max_tokens` tokens (`where` names that
    limit in messages, e.g. "bin 8192"), `rows` rows in the whole dataset (every shard, so shards
    plan alike). The pool goes to `pool_path`, by default into `cache_dir` under a digest of the
    settings. `on_report` gets the report of each build round (there are more rounds when the
    first pool falls short of `max_tokens`); `console`/`progress` show the live writing bar.

    Raises WritingsFailed (a BuildError) when writings failed, BuildError when the server refuses,
    PoolError for bad settings, PoolTooSmall when the pool still cannot fill the request: with a
    hint to raise the temperature when the model wrote identical texts for an ask.
    """
    if not model:
        raise PoolError("a model name is needed (e.g. gpt-4o, or the model your server serves)")
    needles = tuple(needles) or (4,)
    where = where or f"{max_tokens:,} tokens"
    cache_dir = Path(cache_dir or default_cache_dir())
    plan, count, needle_asks = request_plan(
        seed=seed, needles=needles, max_tokens=max_tokens, rows=rows, per_pair=per_pair
    )
    from ..._openai import endpoint

    # The endpoint is part of it: two servers serving one model name write different pools.
    settings = (
        model,
        endpoint(base_url),
        seed,
        needles,
        per_pair,
        temperature,
        max_tokens_per_writing,
        max_tokens,
        needle_asks,
    )
    path = Path(pool_path) if pool_path is not None else default_pool_path(cache_dir, model, settings)
    params = writing_params(temperature, max_tokens_per_writing, None)
    price = price_for(model, price_in, price_out)
    for _ in range(MAX_ROUNDS):
        chosen = dict(plan[:count])
        report = build_pool_openai(
            model,
            chosen,
            concurrency=concurrency,
            base_url=base_url,
            out=path,
            cache_dir=cache_dir,
            params=params,
            api_key=api_key,
            price=price,
            timeout=timeout,
            console=console,
            progress=progress,
        )
        if on_report is not None:
            on_report(report)
        if report.failed:
            raise WritingsFailed(report)
        pool = PoolWriter.from_file(path)
        try:  # more asks cannot help when the model repeats itself for one ask
            check_pool(pool, needles, 0, where)
        except PoolTooSmall as exc:
            raise _explain(exc, model, repeated_asks(pool, chosen)) from None
        if report.tokens >= max_tokens or count >= len(plan):
            break
        per_ask = max(1, report.tokens // max(1, report.writings)) * per_pair
        count = min(len(plan), count + (max_tokens - report.tokens) * 11 // 10 // per_ask + 1)
    check_pool(PoolWriter.from_file(path), needles, max_tokens, where)
    return path


def _explain(exc: PoolTooSmall, model: str, repeated: list[tuple[Ask, int, int]]) -> PoolTooSmall:
    """The pool's shortfall; when the model returned identical texts, which ask and what to try."""
    if not repeated:
        return PoolTooSmall(str(exc))
    ask, got, wanted = repeated[0]
    more = f" (and {len(repeated) - 1} more asks)" if len(repeated) > 1 else ""
    return PoolTooSmall(
        f"{exc}: {model} wrote identical texts for one ask ('{ask.text}': {got} distinct of {wanted} requested{more}); "
        "try a higher --temperature"
    )


def pool_requirements(needles: Iterable[int], bins: Sequence[Bin] | None, tokens: int | None) -> tuple[int, str]:
    """(largest token total a request can target, a label for it) for `PoolWriter.check`."""
    if tokens is not None:
        return tokens, f"--tokens {tokens}"
    if bins is None:
        raise ValueError("give bins or tokens")
    largest = max(bins, key=lambda b: b.upper)
    return largest.upper, f"bin {largest}"


def check_pool(pool: PoolWriter, needles: Iterable[int], max_tokens: int, where: str) -> None:
    """Raise PoolTooSmall saying exactly what is missing when the pool cannot fill a request.

    Needs, for every needle count n, what the assembler needs (an ask with n distinct
    writings, other asks for distractors, another ask with 2 writings for the preamble), and
    at least `max_tokens` of distinct writings in all, so that no row is padded out of a
    handful of repeated writings.
    """
    if not pool._asks:
        raise PoolTooSmall("pool is empty")
    assembler = Assembler(pool, date_added="01-01-2000", tokenizer=pool.tokenizer)
    for n in sorted(set(needles), reverse=True):
        try:
            assembler._needle_candidates(n)
        except AssemblyError as exc:
            raise PoolTooSmall(str(exc)) from None
    total = pool.total_tokens
    if total < max_tokens:
        raise PoolTooSmall(
            f"pool has {total:,} tokens of distinct writings ({pool.n_writings:,} writings) but {where} needs "
            f"up to {max_tokens:,}: add {max_tokens - total:,}+ tokens of writings or choose a smaller bin"
        )
