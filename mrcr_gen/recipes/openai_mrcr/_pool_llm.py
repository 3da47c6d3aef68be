"""Build a pool by asking an LLM behind any OpenAI-compatible endpoint (OpenAI, vLLM, llama.cpp, ...).

Each writing is one chat completion whose single user message is exactly the ask
(`write a {format} about {entity}`), as in openai/mrcr. Requests run with bounded concurrency
and the retry policy of `mrcr_gen._openai`. Every finished writing is committed at once to a
SQLite cache keyed by sha256(endpoint, model, parameters, ask, variant), so a killed run resumes
where it stopped and a rerun sends nothing. Every response that came back counts toward the usage
and the cost, retried ones included (a provider bills them); `<pool>.build.json` records the build
report for scripts. The API key is never stored or printed.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from ..._files import Busy, exclusive_lock, write_text_atomic
from ..._models import Ask, _Frozen
from ..._prices import PRICES, price_for, price_per_1m  # noqa: F401 - re-exported
from ..._seeding import derived_rng
from ..._usage import Usage, cost
from ...pool._batchbuild import BatchFigures, batches_path, refuse_held_writings, running_requests
from ...pool._cache import WritingCache, cache_key, default_cache_dir
from ...pool._pool import PoolError, check_pool_out, write_pool_of
from ...pool._quality import write_quality_report
from ._catalog import Catalog, load_catalog, writing_reference

# Statuses that make every further request pointless (bad key, unknown model, bad parameters).
FATAL_STATUSES = {400, 401, 403, 404, 422}
DEFAULT_CONCURRENCY = 16
Built = TypeVar("Built")  # what a build returns
GPT4O_REFERENCE = "official GPT-4o writings (catalog)"  # what a built pool's quality report compares with


class BuildError(RuntimeError):
    """The build cannot go on (e.g. the server rejects the key or the model)."""


class Failure(_Frozen):
    ask: str
    variant: int
    error: str


class BuildReport(_Frozen):
    model: str
    endpoint: str  # the server that wrote, normalised (`mrcr_gen._openai.endpoint`); never the key
    params: dict[str, Any]  # request parameters besides model and messages
    out: str
    cache: str
    requested: int  # (ask, variant) writings asked for
    cached: int  # of them already in the cache (cost nothing)
    written: int  # newly written by the model in this run
    failed: tuple[Failure, ...]
    http_requests: int  # requests sent, retries included
    responses: dict[str, int]  # requests by HTTP status ("no response": timeout, connection error)
    retries: int  # requests beyond the first of each writing
    # Usage reported by the server for this run's responses, retried ones included (they are billed).
    prompt_tokens: int
    completion_tokens: int
    reasoning_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float | None  # estimate for this run; None when the model's price is unknown
    truncated: int  # writings cut off by max_tokens (finish_reason 'length'), kept
    writings: int  # distinct writings in the pool
    duplicates: int  # identical (ask, text) pairs merged
    asks: int
    tokens: int  # o200k tokens of the pool's writings
    elapsed_s: float
    max_in_flight: int
    batch: BatchFigures | None = None  # a build through the Batch API (`pool build --batch`)

    def summary_lines(self) -> list[str]:
        cost = "unknown (pass --price-in/--price-out)" if self.cost_usd is None else f"${self.cost_usd:,.4f}"
        lines = [
            f"pool {self.out}: {self.writings:,} distinct writings for {self.asks:,} asks, {self.tokens:,} o200k tokens"
            + (f" ({self.duplicates} identical writings merged)" if self.duplicates else ""),
            f"model {self.model} at {self.endpoint}: {self.written:,} written now, {self.cached:,} from cache, "
            f"{len(self.failed)} failed; {self.http_requests:,} HTTP requests ({self.retries:,} retries; "
            + ", ".join(f"{status}: {n:,}" for status, n in sorted(self.responses.items()))
            + f") in {self.elapsed_s:.1f}s",
            f"usage this run: {self.prompt_tokens:,} prompt + {self.completion_tokens:,} completion tokens"
            + (f" ({self.reasoning_tokens:,} reasoning)" if self.reasoning_tokens else "")
            + (f", {self.cached_tokens:,} prompt tokens cached" if self.cached_tokens else "")
            + f", retried responses included; estimated cost {cost}",
        ]
        if self.batch is not None:
            lines[1:3] = self.batch.summary_lines(self, cost)
        if self.truncated:
            lines.append(f"{self.truncated} writings hit the max_tokens limit (kept; finish_reason 'length')")
        for failure in self.failed[:5]:
            lines.append(f"failed: '{failure.ask}' variant {failure.variant}: {failure.error}")
        if len(self.failed) > 5:
            lines.append(f"... and {len(self.failed) - 5} more failures")
        if self.failed:
            lines.append("rerun the same command to retry the failed writings; finished ones are cached")
        return lines


def plan_asks(
    *,
    catalog: Catalog | None = None,
    formats: Sequence[str] | None = None,
    entities: int | None = None,
    seed: int = 0,
    per_pair: int = 1,
    needle_asks: int = 0,
    needle_variants: int = 8,
) -> dict[Ask, int]:
    """ask -> variants to write: formats x entities of the catalog, in a seeded order.

    `entities` keeps a seeded sample of that many entities; the first `needle_asks` asks of the
    seeded order get max(per_pair, needle_variants) variants so that they can serve as needles.
    """
    catalog = catalog or load_catalog()
    names = [f.name for f in catalog.formats]
    chosen_formats = list(dict.fromkeys(formats)) if formats else names
    unknown = [f for f in chosen_formats if f not in names]
    if unknown:
        raise PoolError(f"unknown format(s) {', '.join(map(repr, unknown))}; the catalog has: {', '.join(names)}")
    pool_entities = list(catalog.entities)
    if entities is not None:
        if not 1 <= entities <= len(pool_entities):
            raise PoolError(f"--entities must be between 1 and {len(pool_entities)}, got {entities}")
        pool_entities = sorted(derived_rng("pool-entities", seed).sample(pool_entities, entities))
    asks = [Ask(format=f, entity=e) for f in chosen_formats for e in pool_entities]
    derived_rng("pool-asks", seed).shuffle(asks)
    return {ask: (max(per_pair, needle_variants) if i < needle_asks else per_pair) for i, ask in enumerate(asks)}


def writing_params(
    temperature: float | None,
    max_tokens: int | None,
    extra: Mapping[str, Any] | None,
    max_tokens_field: str = "max_tokens",
) -> dict[str, Any]:
    params = dict(extra or {})
    if temperature is not None:
        params["temperature"] = temperature
    if max_tokens is not None:
        params[max_tokens_field] = max_tokens
    return {k: v for k, v in sorted(params.items()) if v is not None}


def _one_build_per_pool(build: Callable[..., Built]) -> Callable[..., Built]:
    """Hold the pool file's lock (`pool_lock_path`) for the whole build: a second build of the same
    pool would ask for (and pay for) the same writings; it is refused with BuildError naming the first."""
    signature = inspect.signature(build)

    @functools.wraps(build)
    def locked(*args: Any, **kwargs: Any) -> Built:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        out = bound.arguments["out"]
        lock = pool_lock_path(out)
        # before the lock file is made: nothing written
        check_pool_out(out, [lock, build_report_path(out)])
        lock.parent.mkdir(parents=True, exist_ok=True)
        try:
            with exclusive_lock(lock, f"the pool {bound.arguments['out']}"):
                return build(*args, **kwargs)
        except Busy as exc:  # only entering the lock raises it
            raise BuildError(str(exc)) from None

    return locked


def pool_lock_path(out: str | os.PathLike) -> Path:
    """`pool.parquet` -> `pool.lock`, beside the pool: held by the build writing it."""
    out = Path(out)
    return out.with_name(out.name.removesuffix(".parquet") + ".lock")


@_one_build_per_pool
def build_pool_openai(
    model: str,
    asks: Sequence[Ask] | Mapping[Ask, int],
    per_pair: int = 1,
    concurrency: int = DEFAULT_CONCURRENCY,
    base_url: str | None = None,
    out: str | os.PathLike = "pool.parquet",
    cache_dir: str | os.PathLike | None = None,
    params: Mapping[str, Any] | None = None,
    *,
    api_key: str | None = None,
    price: tuple[float, float] | Mapping[str, float] | None = None,
    timeout: float = 600.0,
    max_retries: int = 8,
    backoff_base: float = 1.0,
    console: Console | None = None,
    progress: bool = True,
    compare: str | os.PathLike | None = None,
) -> BuildReport:
    """Write `per_pair` writings per ask (or the count a mapping gives) into the pool at `out`, its
    build report and its quality report (against the pool `compare` when given) beside it.

    Writings already in the cache are reused without a request. Failed writings (retries
    exhausted) are reported and left out of the pool; the pool is still written. A fatal server
    answer (bad key, unknown model) raises BuildError.
    """
    from ..._openai import endpoint

    if concurrency < 1:
        raise PoolError("--concurrency must be at least 1")
    variants = dict(asks) if isinstance(asks, Mapping) else dict.fromkeys(asks, per_pair)
    if not variants or min(variants.values()) < 1:
        raise PoolError("nothing to write: no asks, or fewer than 1 writing per ask")
    params = dict(sorted((params or {}).items()))
    running = running_requests(out)
    if running:  # sent online too, they would be paid twice
        raise PoolError(
            f"{running:,} writings of {out} are in batches still running ({batches_path(out)}): "
            "collect them first with `pool build --batch`"
        )
    if not isinstance(price, Mapping):  # (input, output): cached input at the model's cached price, else input
        price = price_per_1m(model, *price) if price is not None else price_per_1m(model)
    started = time.perf_counter()
    where = endpoint(base_url)
    cache = WritingCache(cache_dir or default_cache_dir())
    jobs = [
        (ask, v, cache_key(where, model, params, ask.text, v)) for ask, count in variants.items() for v in range(count)
    ]
    refuse_held_writings(cache.directory, [key for _, _, key in jobs])
    build = _PoolBuild(
        model, params, where, cache, price, concurrency, max_retries=max_retries, backoff_base=backoff_base
    )
    build.compare = compare
    build.write_missing(
        jobs, console or Console(stderr=True), progress, base_url=base_url, api_key=api_key, timeout=timeout
    )
    return build.publish(jobs, out, started)


Job = tuple[Ask, int, str]  # (ask, variant, cache key)


class _PoolBuild:
    """One pool build at work: the cache, the writings done, what was billed, the failures."""

    def __init__(
        self,
        model: str,
        params: dict[str, Any],
        where: str,
        cache: WritingCache,
        price: Mapping[str, float] | None,
        concurrency: int,
        *,
        max_retries: int,
        backoff_base: float,
    ):
        from ..._openai import Billing, BoundedRunner

        self.model = model
        self.params = params
        self.where = where
        self.cache = cache
        self.price = price
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.done: dict[str, tuple[str, str | None]] = {}  # cache key -> (text, finish_reason)
        self.cached = 0
        self.usage = {"written": 0, "retries": 0}
        self.billed = Billing()  # every response of this run, retried ones included
        self.failures: list[Failure] = []
        self.fatal: list[str] = []
        self.runner = BoundedRunner(concurrency)
        self.compare: str | os.PathLike | None = None  # the quality report's reference pool

    def cost(self) -> float | None:
        """What this run's responses cost, through the usage ledger (cached tokens at the cached price)."""
        if self.price is None:
            return None
        billed = self.billed
        usage = Usage(billed.prompt_tokens, billed.completion_tokens, billed.reasoning_tokens, billed.cached_tokens)
        return cost(self.price, usage)["cost_usd"]

    def cost_text(self) -> str:
        value = self.cost()
        return "cost n/a" if value is None else f"~${value:,.4f}"

    def write_missing(
        self,
        jobs: list[Job],
        console: Console,
        progress: bool,
        *,
        base_url: str | None,
        api_key: str | None,
        timeout: float,
    ) -> None:
        """Ask for the writings the cache lacks, a progress bar on `console`; BuildError when the
        server refused for good or no client can be made. The cache is closed after."""
        from ..._openai import ChatError

        self.done = self.cache.get_many([key for _, _, key in jobs])
        self.cached = len(self.done)
        todo = [job for job in jobs if job[2] not in self.done]
        bar = _progress_bar(console, progress)
        try:
            if todo:
                with bar:
                    asyncio.run(self._write_all(len(jobs), todo, bar, base_url, api_key, timeout))
        except ChatError as exc:  # e.g. no API key
            raise BuildError(str(exc)) from None
        finally:
            self.cache.close()
        if self.fatal:
            raise BuildError(f"the server refused the request: {self.fatal[0]}")

    async def _write_all(
        self, total: int, todo: list[Job], bar: Progress, base_url: str | None, api_key: str | None, timeout: float
    ) -> None:
        from ..._openai import make_client

        client = make_client(base_url, api_key=api_key, timeout=timeout)
        task = bar.add_task(
            "writings", total=total, completed=self.cached, tokens="0", cost=self.cost_text(), failed=""
        )
        try:
            await self.runner.map(functools.partial(self._write_one, client, bar, task), todo)
        finally:
            await client.close()

    async def _write_one(self, client: Any, bar: Progress, task: TaskID, job: Job) -> None:
        from ..._openai import ChatError, utf8_problem

        ask, variant, key = job
        if self.fatal:
            return
        try:
            result = await self._ask(client, ask)
        except ChatError as exc:
            self.billed.add(exc.billing)
            self.usage["retries"] += max(exc.attempts - 1, 0)
            if exc.status in FATAL_STATUSES:
                self.fatal.append(str(exc))
            self._failed(bar, task, Failure(ask=ask.text, variant=variant, error=str(exc)))
            return
        self.billed.add(result.billing)
        self.usage["retries"] += result.attempts - 1
        unstorable = utf8_problem(result.text)
        if unstorable:  # no pool file or cache can hold it; a rerun asks again
            self._failed(bar, task, Failure(ask=ask.text, variant=variant, error=unstorable))
            return
        self.cache.put(key, self.where, self.model, self.params, ask, variant, result)
        self.done[key] = (result.text, result.finish_reason)
        self.usage["written"] += 1
        tokens = f"{self.billed.prompt_tokens + self.billed.completion_tokens:,}"
        bar.update(task, advance=1, tokens=tokens, cost=self.cost_text())

    def _failed(self, bar: Progress, task: TaskID, failure: Failure) -> None:
        self.failures.append(failure)
        bar.update(task, failed=f"{len(self.failures)} failed")

    async def _ask(self, client: Any, ask: Ask) -> Any:
        from ..._openai import chat_completion

        return await chat_completion(
            client,
            self.model,
            [{"role": "user", "content": ask.text}],
            max_retries=self.max_retries,
            backoff_base=self.backoff_base,
            retry_empty=True,
            **self.params,
        )

    def publish(self, jobs: list[Job], out: str | os.PathLike, started: float) -> BuildReport:
        """Write the pool (its writings deduplicated) and its build report beside it; the report."""
        billed = self.billed
        finished = [(ask, self.done[key]) for ask, _, key in jobs if key in self.done]
        writings, duplicates = write_pool_of(
            [(ask, text) for ask, (text, _) in finished], f"{self.model} @ {self.where}", out
        )
        report = BuildReport(
            model=self.model,
            endpoint=self.where,
            params=self.params,
            out=str(out),
            cache=str(self.cache.path),
            requested=len(jobs),
            cached=self.cached,
            written=self.usage["written"],
            failed=tuple(self.failures),
            http_requests=billed.requests,
            responses=dict(sorted(billed.statuses.items())),
            retries=self.usage["retries"],
            prompt_tokens=billed.prompt_tokens,
            completion_tokens=billed.completion_tokens,
            reasoning_tokens=billed.reasoning_tokens,
            cached_tokens=billed.cached_tokens,
            cost_usd=self.cost(),
            truncated=sum(1 for _, (_, finish) in finished if finish == "length"),
            **pool_figures(writings, duplicates),
            elapsed_s=time.perf_counter() - started,
            max_in_flight=self.runner.max_in_flight,
        )
        write_text_atomic(build_report_path(out), report.model_dump_json(indent=2) + "\n")
        write_quality_report(out, writing_reference(), GPT4O_REFERENCE, compare=self.compare)
        return report


def _progress_bar(console: Console, progress: bool) -> Progress:
    return Progress(
        TextColumn("[bold]writing"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[tokens]} tokens"),
        TextColumn("{task.fields[cost]}"),
        TextColumn("{task.fields[failed]}"),
        TimeElapsedColumn(),
        console=console,
        disable=not progress,
    )


def pool_figures(writings: Sequence[Any], duplicates: int) -> dict[str, Any]:
    """A build report's figures of the pool written: distinct writings, merged duplicates, asks, tokens."""
    return {
        "writings": len(writings),
        "duplicates": duplicates,
        "asks": len({w.ask for w in writings}),
        "tokens": sum(w.n_tokens for w in writings),
    }


def build_report_path(out: str | os.PathLike) -> Path:
    """`pool.parquet` -> `pool.build.json`, beside the pool: the build report for scripts."""
    out = Path(out)
    return out.with_name(out.name.removesuffix(".parquet") + ".build.json")


def print_build_report(report: BuildReport, console: Console) -> None:
    """A build report's summary lines on `console` (stderr in the commands)."""
    for line in report.summary_lines():
        console.print(line, markup=False, highlight=False, soft_wrap=True)
