"""`mrcr-gen pool build --batch`: a pool's writings through the OpenAI Batch API, at half the price.

The core (`mrcr_gen.pool._batchbuild`) sends every (ask, variant) the writings cache lacks as batch
request lines (custom_id = the writing's cache key, the body exactly what an online build sends,
so the writings are keyed as an online build's are and either build reuses the other's), collects
what ended into the cache and resends on a rerun what failed or expired. This module plans the
asks, holds the pool's lock, and once no batch is running writes the pool of the writings the
cache holds, its build report (`<pool>.build.json`: the batches' reply lines and their cost at the
Batch API's discount, through the usage ledger) and its quality report. While batches run
(`wait=False`) nothing is written beside the pool but its batches folder.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..._files import write_text_atomic
from ..._models import Ask
from ..._usage import cost, from_record
from ...batch import BatchLimits
from ...pool._batchbuild import BatchFigures, PoolBatches, Progress, batches_path, run_batches
from ...pool._batchfiles import ledger_price
from ...pool._cache import CACHE_FILE, WritingCache, cache_key, default_cache_dir
from ...pool._pool import PoolError, write_pool_of
from ...pool._quality import write_quality_report
from ._catalog import writing_reference
from ._pool_llm import (
    GPT4O_REFERENCE,
    BuildError,
    BuildReport,
    Failure,
    _one_build_per_pool,
    build_report_path,
    pool_figures,
)


@_one_build_per_pool
def build_pool_batch(
    model: str,
    asks: Mapping[Ask, int],
    out: str | os.PathLike = "pool.parquet",
    cache_dir: str | os.PathLike | None = None,
    params: Mapping[str, Any] | None = None,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    price_in: float | None = None,
    price_out: float | None = None,
    wait: bool = True,
    limits: BatchLimits = BatchLimits(),
    timeout: float = 600.0,
    max_retries: int = 8,
    compare: str | os.PathLike | None = None,
    on_status: Callable[[str], None] | None = None,
) -> tuple[Progress, BuildReport | None]:
    """Build the pool at `out` through the Batch API (see the module docstring): (what this call
    did, the build report once no batch is running, else None). BuildError when the API refused
    or failed for good (a rerun continues: nothing is sent twice), PoolError for bad input."""
    from ..._openai import ChatError, endpoint, make_client

    if not asks or min(asks.values()) < 1:
        raise PoolError("nothing to write: no asks, or fewer than 1 writing per ask")
    started = time.perf_counter()
    params = dict(sorted((params or {}).items()))
    price = ledger_price(model, price_in, price_out, discounted=True)
    where = endpoint(base_url)
    cache_dir = Path(cache_dir or default_cache_dir())
    jobs = [(ask, v, cache_key(where, model, params, ask.text, v)) for ask, count in asks.items() for v in range(count)]
    try:
        client = make_client(base_url, api_key=api_key, timeout=timeout)
    except ChatError as exc:  # no API key: refused before the batches folder is made
        raise BuildError(str(exc)) from None
    batches = PoolBatches(batches_path(out), model, where, params, limits)
    cached = _cached(cache_dir, [key for _, _, key in jobs])
    try:
        progress = asyncio.run(_run(batches, jobs, cache_dir, client, wait, max_retries, on_status))
    except ChatError as exc:
        how = "refused" if exc.fatal else "failed"
        raise BuildError(f"the Batch API {how}: {exc} (rerun to continue: nothing is sent twice)") from None
    if batches.folder.pending():
        return progress, None
    return progress, _publish(batches, jobs, cache_dir, out, progress, cached, price, compare, started)


async def _run(batches, jobs, cache_dir, client, wait, max_retries, on_status) -> Progress:
    try:
        return await run_batches(
            batches, jobs, cache_dir, client, wait=wait, max_retries=max_retries, on_status=on_status
        )
    finally:
        await client.close()


def _cached(cache_dir: Path, keys: Sequence[str]) -> dict[str, tuple[str, str | None]]:
    cache = WritingCache(cache_dir)
    try:
        return cache.get_many(keys)
    finally:
        cache.close()


def _publish(
    batches: PoolBatches,
    jobs: Sequence[tuple[Ask, int, str]],
    cache_dir: Path,
    out: str | os.PathLike,
    progress: Progress,
    cached_before: Mapping[str, Any],
    price: dict[str, Any] | None,
    compare: str | os.PathLike | None,
    started: float,
) -> BuildReport:
    """Write the pool of every planned writing the cache holds, its build and quality reports."""
    record = batches.record
    done = _cached(cache_dir, [key for _, _, key in jobs])
    finished = [(ask, done[key]) for ask, _, key in jobs if key in done]
    source = f"{record.model} @ {record.endpoint}"
    writings, duplicates = write_pool_of([(ask, text) for ask, (text, _) in finished], source, out)
    totals = batches.totals()
    usage = from_record(totals.usage)
    report = BuildReport(
        model=record.model,
        endpoint=record.endpoint,
        params=record.params,
        out=str(out),
        cache=str(cache_dir / CACHE_FILE),
        requested=len(jobs),
        cached=len(cached_before),
        written=progress.stored,
        failed=tuple(Failure(ask=ask, variant=v, error=error) for ask, v, error in progress.failures),
        http_requests=0,
        responses={},
        retries=0,
        **usage.as_record(),
        cost_usd=None if price is None else cost(price, usage)["cost_usd"],
        truncated=sum(1 for _, (_, finish) in finished if finish == "length"),
        **pool_figures(writings, duplicates),
        elapsed_s=time.perf_counter() - started,
        max_in_flight=0,
        batch=BatchFigures(
            folder=str(batches_path(out)),
            batches=totals.batches,
            lines=totals.lines,
            failed_lines=totals.failed_lines,
            sent_now=progress.sent,
            price_per_1m=price,
        ),
    )
    write_text_atomic(build_report_path(out), report.model_dump_json(indent=2) + "\n")
    write_quality_report(out, writing_reference(), GPT4O_REFERENCE, compare=compare)
    return report
