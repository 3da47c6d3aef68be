"""Pools written offline: the writings' requests as an OpenAI batch input file (what `vllm run-batch`
and the Batch API read), and the replies of its output file into the writings cache.

`export_requests` writes one line per (ask, variant) the cache lacks, `custom_id` = the writing's
cache key (sha256 of endpoint, model, parameters, ask and variant: `_cache.cache_key`), so a line
names exactly one writing of one model at one endpoint. Beside the requests goes their manifest
(`<requests>.manifest.json`): the model, the endpoint name, the parameters, the file's sha256 and
custom_id -> (ask, variant); `import-results` reads it, so an output file is always read against
the request set it answers. The endpoint is a name the user gives (`run-batch` by default): no
server wrote these writings, and two offline runs of one model name stay apart if named apart.

`store_replies` is the import's small interface: validated (custom_id, chat completion body)
replies in, the cache written, counts out. Every check (foreign ids, another model, conflicting
duplicates) runs before the cache is touched.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .._files import atomic_path, file_sha256, write_text_atomic
from .._models import Ask, _Frozen
from .._prices import price_per_1m
from .._usage import Usage, batch_price, from_openai
from ..batch import encoded_line, request_line, same_model
from ._cache import WritingCache, cache_key
from ._pool import PoolError, parse_ask

DEFAULT_ENDPOINT = "run-batch"  # the endpoint name of writings from a batch file, unless named


class WritingRequests(_Frozen):
    """Requests of writings by one model at one endpoint with one set of parameters, keyed by
    custom_id (the writing's cache key): which (ask, variant) each one is."""

    model: str
    endpoint: str
    params: dict[str, Any]
    requests: dict[str, tuple[str, int]]  # custom_id -> (ask, variant)

    def writings(self) -> dict[str, tuple[str, int]]:
        """custom_id -> (ask, variant) of every writing `ask_of` knows."""
        return self.requests

    def ask_of(self, custom_id: str) -> tuple[Ask, int]:
        text, variant = self.writings()[custom_id]
        ask = parse_ask(text)
        if ask is None:  # written by mrcr-gen from an Ask: a hand-edited record
            raise PoolError(f"recorded ask {text!r} is not 'write a {{format}} about {{entity}}'")
        return ask, variant


class RequestSet(WritingRequests):
    """The manifest of a requests file: what its lines ask for and which writing each one is."""

    requests_sha256: str
    cached: int  # writings of the plan already in the cache when it was exported (not requested)
    planned: dict[str, tuple[str, int]]  # every writing of the plan, requested or cached

    def writings(self) -> dict[str, tuple[str, int]]:
        return self.planned


def manifest_path(requests: str | os.PathLike) -> Path:
    """`requests.jsonl` -> `requests.manifest.json`, beside the requests."""
    requests = Path(requests)
    return requests.with_name(requests.name.removesuffix(".jsonl") + ".manifest.json")


def read_manifest(requests: str | os.PathLike) -> RequestSet:
    """The manifest of a requests file; PoolError when it is missing or the file changed since."""
    path = manifest_path(requests)
    if not path.is_file():
        raise PoolError(f"{path} does not exist: {requests} was not written by `mrcr-gen pool export-requests`")
    try:
        manifest = RequestSet.model_validate_json(path.read_text(encoding="utf-8"))
    except ValueError:
        raise PoolError(f"{path} is not a manifest of `mrcr-gen pool export-requests`") from None
    if not Path(requests).is_file() or file_sha256(requests) != manifest.requests_sha256:
        raise PoolError(f"{requests} is missing or changed since it was exported (its manifest: {path})")
    return manifest


def export_requests(
    plan: Mapping[Ask, int],
    *,
    model: str,
    out: str | os.PathLike,
    cache_dir: str | os.PathLike,
    endpoint: str = DEFAULT_ENDPOINT,
    params: Mapping[str, Any] | None = None,
) -> RequestSet:
    """Write a batch input file with a line per writing of `plan` (ask -> variants) the cache lacks,
    and its manifest beside it. PoolError, nothing written, for an `out` this command did not write."""
    out = Path(out)
    if out.exists():
        try:
            read_manifest(out)
        except PoolError:
            raise PoolError(
                f"{out} exists and is not a requests file this command wrote; choose another --out"
            ) from None
    params = dict(sorted((params or {}).items()))
    planned = {
        cache_key(endpoint, model, params, ask.text, v): (ask.text, v)
        for ask, count in plan.items()
        for v in range(count)
    }
    if not planned:
        raise PoolError("nothing to request: no asks, or fewer than 1 writing per ask")
    cache = WritingCache(cache_dir)
    try:
        cached = cache.get_many(list(planned))
    finally:
        cache.close()
    requests = {key: entry for key, entry in planned.items() if key not in cached}
    with atomic_path(out) as tmp, open(tmp, "wb") as handle:
        for key, (ask, _) in requests.items():
            handle.write(encoded_line(request_line(key, writing_body(model, ask, params))))
    manifest = RequestSet(
        model=model,
        endpoint=endpoint,
        params=params,
        requests_sha256=file_sha256(out),
        cached=len(cached),
        requests=requests,
        planned=planned,
    )
    write_text_atomic(manifest_path(out), manifest.model_dump_json(indent=1) + "\n")
    return manifest


def writing_body(model: str, ask: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """The chat-completions body of one writing: the ask as the single user message."""
    return {"model": model, "messages": [{"role": "user", "content": ask}], **params}


def ledger_price(
    model: str, price_in: float | None = None, price_out: float | None = None, *, discounted: bool
) -> dict[str, Any] | None:
    """`price_per_1m` of batch lines (the usage ledger's form): the flags, else the model's list
    price (`_prices.price_per_1m`); with `discounted` (replies of the OpenAI Batch API) at the batch
    discount with the list price beside. None when the price is not known."""
    listed = price_per_1m(model, price_in, price_out)
    if listed is None:
        return None
    return batch_price(listed) if discounted else listed


class StoredReplies(_Frozen):
    stored: int  # writings written into the cache now
    already_cached: int  # replies for writings the cache had already (neither stored nor costed again)
    prompt_tokens: int
    completion_tokens: int
    reasoning_tokens: int = 0
    cached_tokens: int = 0

    @property
    def usage(self) -> Usage:
        return Usage(self.prompt_tokens, self.completion_tokens, self.reasoning_tokens, self.cached_tokens)


def store_replies(
    manifest: RequestSet, replies: Iterable[tuple[str, Any]], cache_dir: str | os.PathLike
) -> StoredReplies:
    """Write validated (custom_id, chat completion body) replies into the cache, each custom_id once.

    PoolError, with nothing written, for a custom_id the manifest never requested, a reply of
    another model, or a body that is not a chat completion with text."""
    results = []
    seen: set[str] = set()
    for custom_id, body in replies:
        if custom_id in seen:
            raise PoolError(f"custom_id {custom_id} is given twice: a reply is used once")
        seen.add(custom_id)
        results.append(checked_reply(manifest, custom_id, body))
    return store_checked(manifest, results, cache_dir)


Checked = tuple[str, Any, Usage]  # (custom_id, ChatResult, its usage)


def checked_reply(manifest: WritingRequests, custom_id: str, body: Any) -> Checked:
    """A reply that can be stored as its request's writing; PoolError when it cannot: a custom_id
    never requested, a reply of another model, a body that is not a chat completion with text."""
    from .._openai import ChatError, completion_from_body, utf8_problem

    if custom_id not in manifest.requests:
        raise PoolError(f"custom_id {custom_id!r} is not one of the requests of this request set")
    served = body.get("model") if isinstance(body, dict) else None
    if not isinstance(served, str) or not same_model(served, manifest.model):
        raise PoolError(f"custom_id {custom_id} was answered by {served!r}, not {manifest.model!r}")
    try:
        result = completion_from_body(body)
    except ChatError as exc:
        raise PoolError(f"custom_id {custom_id}: {exc}") from None
    problem = utf8_problem(result.text)
    if problem:
        raise PoolError(f"custom_id {custom_id}: {problem}")
    return custom_id, result, from_openai(body.get("usage"))


def store_checked(manifest: WritingRequests, results: list[Checked], cache_dir: str | os.PathLike) -> StoredReplies:
    """Store checked replies the cache lacks, in one transaction (all, or none when killed)."""
    cache = WritingCache(cache_dir)
    try:
        present = cache.get_many([custom_id for custom_id, _, _ in results])
        fresh = [reply for reply in results if reply[0] not in present]
        rows = []
        for custom_id, result, _ in fresh:
            ask, variant = manifest.ask_of(custom_id)
            rows.append((custom_id, manifest.endpoint, manifest.model, manifest.params, ask, variant, result))
        cache.put_all(rows)  # all or none: a killed import leaves the cache as it was
    finally:
        cache.close()
    usage = sum((used for _, _, used in fresh), Usage())
    return StoredReplies(stored=len(fresh), already_cached=len(results) - len(fresh), **usage.as_record())
