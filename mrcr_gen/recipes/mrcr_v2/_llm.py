"""MRCR v2 writings from any OpenAI-compatible model.

Each writing is one chat completion whose only message is the v2 ask itself ("Write a {format}
about {topic} in {style} style."), followed for variant k by one line asking for a different
angle (from the catalog's `angles`), so that the n writings of a needle key differ. Writings
are cached in the same SQLite cache as pool builds (keyed by model, parameters, request and
variant): a rerun sends only what is missing.

With `batch`, the missing writings go through the OpenAI Batch API instead (half the price), on
the core's batch machinery (`mrcr_gen.pool._batchbuild`, as `pool build --batch`), in a batches
folder of the cache for this endpoint, model and parameters (`v2_batches_path`), which one command
holds at a time (a lock beside it). A rerun collects what ended and resends what failed or expired;
while batches run the writer raises `WritingsPending` (`wait=False`: submitted, not waited for).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from ..._models import Ask, Writing
from ..._tokens import DEFAULT_TOKENIZER, count_tokens_batch
from ...pool._batchfiles import WritingRequests
from ._catalog import V2Catalog, V2Key, load_v2_catalog
from ._offline import VARIANTS_PER_KEY

# A line of model text that would read as a new turn of the transcript is defused.
_TURN_LIKE = re.compile(r"(?m)^(User|Assistant):")


class WritingsFailed(RuntimeError):
    """Some writings could not be obtained after the retries."""


class WritingsPending(RuntimeError):
    """Some writings are in Batch API batches still running: the same command collects them later."""


@dataclass(frozen=True)
class _Request:
    text: str  # what WritingCache and cache_key read


def request_text(catalog: V2Catalog, key: V2Key, variant: int) -> str:
    angle = catalog.angles[variant % len(catalog.angles)]
    return f"{key.ask}\n\nWrite it {angle}. Reply with the text only."


def clean_writing(text: str) -> str:
    return _TURN_LIKE.sub(lambda m: f"{m[1]} -", text.strip())


class V2OpenAIWriter:
    name = "openai"
    variants_per_key = VARIANTS_PER_KEY

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        cache_dir: str | Path | None = None,
        concurrency: int = 16,
        temperature: float | None = None,
        max_tokens: int | None = None,
        catalog: V2Catalog | None = None,
        tokenizer: str = DEFAULT_TOKENIZER,
        batch: bool = False,
        wait: bool = True,
        limits: Any = None,
    ) -> None:
        from ..._openai import endpoint
        from ...pool._cache import WritingCache, default_cache_dir

        self.model = model
        self.endpoint = endpoint(base_url)  # part of each writing's cache key: servers differ
        self.tokenizer = tokenizer
        self.base_url = base_url
        self.api_key = api_key
        self.concurrency = concurrency
        self.params: dict[str, Any] = {
            k: v for k, v in {"temperature": temperature, "max_tokens": max_tokens}.items() if v is not None
        }
        self.catalog = catalog or load_v2_catalog()
        self.cache = WritingCache(Path(cache_dir) if cache_dir else default_cache_dir())
        self._memory: dict[tuple[V2Key, int], Writing] = {}
        self.requests_sent = 0
        self.batch, self.wait, self.limits = batch, wait, limits  # limits: a BatchLimits (None: the API's)

    def prefetch(self, keys: Sequence[tuple[V2Key, int]]) -> None:
        """Obtain every writing for `keys` now, concurrently (the assembler then never waits)."""
        from ...pool._cache import cache_key

        missing = [k for k in dict.fromkeys(keys) if k not in self._memory]
        if not missing:  # all in memory (in a worker: prefetched before the writer was sent)
            return
        requests = {k: _Request(request_text(self.catalog, *k)) for k in missing}
        cache_keys = {k: cache_key(self.endpoint, self.model, self.params, requests[k].text, k[1]) for k in missing}
        cached = self.cache.get_many(list(cache_keys.values()))
        texts = {k: cached[cache_keys[k]][0] for k in missing if cache_keys[k] in cached}
        to_send = [k for k in missing if k not in texts]
        if to_send and self.batch:
            texts.update(self._batch_all(to_send, requests, cache_keys))
        elif to_send:
            texts.update(asyncio.run(self._request_all(to_send, requests, cache_keys)))
        cleaned = [clean_writing(texts[k]) for k in missing]
        for key, text, n in zip(missing, cleaned, count_tokens_batch(cleaned, tokenizer=self.tokenizer), strict=True):
            self._memory[key] = Writing(text=text, n_tokens=n)

    async def _request_all(self, keys, requests, cache_keys) -> dict:
        from ..._openai import BoundedRunner, ChatError, chat_completion, make_client, utf8_problem

        client = make_client(self.base_url, api_key=self.api_key)
        runner = BoundedRunner(self.concurrency)
        failures: list[str] = []
        texts: dict = {}

        async def one(key: tuple[V2Key, int]) -> None:
            request = requests[key]
            try:
                result = await chat_completion(
                    client, self.model, [{"role": "user", "content": request.text}], **self.params
                )
            except ChatError as exc:
                failures.append(f"{key[0].ask} (variant {key[1]}): {exc}")
                return
            if not result.text.strip():
                failures.append(f"{key[0].ask} (variant {key[1]}): empty reply")
                return
            unstorable = utf8_problem(result.text)
            if unstorable:  # no CSV or cache can hold it; a rerun asks again
                failures.append(f"{key[0].ask} (variant {key[1]}): {unstorable}")
                return
            self.requests_sent += 1
            self.cache.put(cache_keys[key], self.endpoint, self.model, self.params, request, key[1], result)
            texts[key] = result.text

        try:
            await runner.map(one, keys)
        finally:
            await client.close()
        if failures:
            raise WritingsFailed(f"{len(failures)} writings failed (first: {failures[0]})")
        return texts

    def _batch_all(self, keys, requests, cache_keys) -> dict:
        """The writings of `keys` through the Batch API (see the module docstring); WritingsPending
        while batches run, WritingsFailed for writings that failed (a rerun sends them again),
        PoolError when the batches folder is another command's."""
        from ..._files import Busy, exclusive_lock
        from ..._openai import make_client
        from ...batch import BatchLimits
        from ...pool._batchbuild import PoolBatches, run_batches
        from ...pool._pool import PoolError

        folder = v2_batches_path(self.cache.directory, self.endpoint, self.model, self.params)
        jobs = [(requests[k], k[1], cache_keys[k]) for k in keys]
        folder.parent.mkdir(parents=True, exist_ok=True)
        try:
            with exclusive_lock(folder.with_name(folder.name + ".lock"), f"the MRCR v2 batches {folder}"):
                batches = PoolBatches(
                    folder, self.model, self.endpoint, self.params, self.limits or BatchLimits(), V2Requests
                )
                client = make_client(self.base_url, api_key=self.api_key)
                run = run_batches(batches, jobs, self.cache.directory, client, wait=self.wait, max_retries=8)
                progress = asyncio.run(_closing(client, run))
        except Busy as exc:
            raise PoolError(str(exc)) from None
        self.requests_sent += progress.sent
        if progress.waiting:
            raise WritingsPending(
                f"{progress.waiting} writings are in batches still running ({folder}; {progress.sent} sent now): "
                "run the same command later to collect them"
            )
        found = self.cache.get_many([cache_keys[k] for k in keys])
        failed = [f"{text.split(chr(10))[0]} (variant {v}): {error}" for text, v, error in progress.failures]
        if len(found) < len(keys):
            first = failed[0] if failed else "not collected"
            raise WritingsFailed(f"{len(keys) - len(found)} writings failed (first: {first}); rerun to send them again")
        return {k: found[cache_keys[k]][0] for k in keys}

    def __getstate__(self) -> dict[str, Any]:
        """Sent to the workers without its cache (an open database): they read what was prefetched."""
        return {**self.__dict__, "cache": None}

    def writings(self, keys: Sequence[tuple[V2Key, int]]) -> list[Writing]:
        self.prefetch(keys)
        return [self._memory[k] for k in keys]

    def describe(self) -> dict:
        return {
            "name": self.name,
            "model": self.model,
            "endpoint": self.endpoint,
            "params": self.params,
            "variants_per_key": self.variants_per_key,
        }

    def catalog_keys(self) -> list[tuple[V2Key, int]]:
        """Every writing a dataset may use: each needle, filler and few-shot key, every variant."""
        c = self.catalog
        return [(k, v) for k in (*c.needle_keys, *c.filler_keys, *c.fewshot_keys) for v in range(self.variants_per_key)]


class V2Requests(WritingRequests):
    """The record of MRCR v2's batched writings: each request is the writer's request text."""

    def ask_of(self, custom_id: str) -> tuple[Ask, int]:
        text, variant = self.requests[custom_id]
        return cast(Ask, _Request(text)), variant  # the cache stores its `text`


def v2_batches_path(cache_dir: Path, endpoint: str, model: str, params: dict[str, Any]) -> Path:
    """The batches folder of MRCR v2 writings by `model` at `endpoint` with `params`, in the cache."""
    digest = hashlib.sha256(json.dumps([endpoint, model, params], sort_keys=True).encode()).hexdigest()
    return Path(cache_dir) / "batches" / f"mrcr-v2-{digest[:16]}"


async def _closing(client: Any, run: Any) -> Any:
    try:
        return await run
    finally:
        await client.close()
