"""`mrcr-gen pool import-results`: the output file of a `pool export-requests` file (from `vllm
run-batch` or the Batch API) into the writings cache, then the pool of every planned writing.

An output file is read against its request set's manifest. Its lines are batch output lines
(`eval._batchfile.outcome_of` reads each one, as the eval's batch import does). What cannot be
trusted is refused before anything is written (exit 2): a line that is no batch output line, a
custom_id the request file never had, a reply of another model. What can be is reported, never
silently used: requests with no line (missing), lines that failed, a custom_id answered twice
with different texts (conflicting: neither is stored) and twice with the same (duplicated: stored
once, costed once). A reply already in the cache (an import run again) is neither stored nor
costed again. Missing and failed writings are requested again by exporting again.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path
from typing import Any

from ..._files import write_text_atomic
from ..._models import _Frozen
from ..._prices import cost_usd
from ...pool._batchfiles import RequestSet, read_manifest, store_replies
from ...pool._cache import WritingCache, default_cache_dir
from ...pool._pool import PoolError, write_pool_of
from ...pool._quality import write_quality_report
from ._catalog import writing_reference
from ._pool_llm import GPT4O_REFERENCE, Failure, build_report_path


class ImportReport(_Frozen):
    model: str
    endpoint: str
    requests: str
    results: str
    out: str
    cache: str
    requested: int  # lines of the request file
    lines: int  # output lines read
    stored: int  # writings written into the cache now
    already_cached: int  # replies the cache held already (not costed again)
    duplicated: int  # extra lines repeating a custom_id's reply (used once)
    conflicting: tuple[str, ...]  # asks (variant) answered twice with different texts: not stored
    failed: tuple[Failure, ...]
    missing: tuple[str, ...]  # asks (variant) with no line in the output
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None
    writings: int
    duplicates: int  # identical (ask, text) writings merged in the pool
    asks: int
    tokens: int

    def summary_lines(self) -> list[str]:
        cost = "unknown (pass --price-in/--price-out)" if self.cost_usd is None else f"${self.cost_usd:,.4f}"
        lines = [
            f"pool {self.out}: {self.writings:,} distinct writings for {self.asks:,} asks, "
            f"{self.tokens:,} o200k tokens",
            f"{self.results}: {self.lines:,} lines for {self.requested:,} requests of {self.model} ({self.endpoint}): "
            f"{self.stored:,} stored, {self.already_cached:,} already cached, {self.duplicated} duplicated lines, "
            f"{len(self.conflicting)} conflicting, {len(self.failed)} failed, {len(self.missing)} missing",
            f"usage of the stored replies: {self.prompt_tokens:,} prompt + {self.completion_tokens:,} completion "
            f"tokens; estimated cost {cost}",
        ]
        lines += [f"conflicting: {what}" for what in self.conflicting[:5]]
        lines += [f"failed: '{f.ask}' variant {f.variant}: {f.error}" for f in self.failed[:5]]
        lines += [f"missing: {what}" for what in self.missing[:5]]
        if self.conflicting or self.failed or self.missing:
            lines.append("export the requests again to ask for the writings that are not in the cache")
        return lines


def read_output(results: str | os.PathLike, manifest: RequestSet) -> tuple[dict[str, list[Any]], int]:
    """(custom_id -> its outcomes in the file, in order; lines read); PoolError for a line that is
    not a batch output line or names a custom_id the request file never had."""
    from ...eval._batchfile import outcome_of

    outcomes: dict[str, list[Any]] = defaultdict(list)
    lines = 0
    with open(results, encoding="utf-8", errors="surrogateescape") as handle:
        for number, text in enumerate(handle, 1):
            if not text.strip():
                continue
            lines += 1
            try:
                found = outcome_of(json.loads(text))
            except ValueError:
                found = None
            if found is None:
                raise PoolError(f"{results}:{number}: not a batch output line (JSON with custom_id and response)")
            custom_id, outcome = found
            if custom_id not in manifest.requests:
                raise PoolError(
                    f"{results}:{number}: custom_id {custom_id!r} is not in the request file: "
                    "an output of another request set?"
                )
            outcomes[custom_id].append(outcome)
    return outcomes, lines


def _reply_text(body: Any) -> str | None:
    """The assistant text of a chat completion body (None when it is none: `store_replies` refuses it)."""
    from ..._openai import ChatError, completion_from_body

    try:
        return completion_from_body(body).text
    except ChatError:
        return None


def _label(manifest: RequestSet, custom_id: str) -> str:
    ask, variant = manifest.requests[custom_id]
    return f"'{ask}' variant {variant}"


def sort_outcomes(outcomes: dict[str, list[Any]], manifest: RequestSet) -> tuple[list, int, list, list, list]:
    """(replies to store, duplicated lines, conflicting, failed, missing) of an output file's outcomes."""
    replies, conflicting, failed = [], [], []
    duplicated = 0
    for custom_id, found in outcomes.items():
        ok = [o.body for o in found if o.ok]
        texts = {_reply_text(body) for body in ok}
        if len(texts) > 1:
            conflicting.append(_label(manifest, custom_id))
            continue
        duplicated += len(found) - 1
        if ok:
            replies.append((custom_id, ok[0]))
        else:
            ask, variant = manifest.requests[custom_id]
            failed.append(Failure(ask=ask, variant=variant, error=found[-1].error or "failed"))
    missing = [_label(manifest, custom_id) for custom_id in manifest.requests if custom_id not in outcomes]
    return replies, duplicated, conflicting, failed, missing


def import_results(
    results: str | os.PathLike,
    requests: str | os.PathLike,
    out: str | os.PathLike,
    *,
    cache_dir: str | os.PathLike | None = None,
    price: tuple[float, float] | None = None,
    compare: str | os.PathLike | None = None,
) -> ImportReport:
    """Store the replies of a batch output file into the cache and write the pool of every writing
    of its request set the cache holds, with its import and quality reports beside it. PoolError,
    with nothing written, for an output file that does not answer `requests`."""
    manifest = read_manifest(requests)
    if not Path(results).is_file():
        raise PoolError(f"{results} does not exist")
    if compare is not None:
        from ...pool._pool import read_pool

        read_pool(compare)  # a bad reference is refused before anything is written
    outcomes, lines = read_output(results, manifest)
    replies, duplicated, conflicting, failed, missing = sort_outcomes(outcomes, manifest)
    cache_dir = Path(cache_dir or default_cache_dir())
    stored = store_replies(manifest, replies, cache_dir)
    cache = WritingCache(cache_dir)
    try:
        done = cache.get_many(list(manifest.planned))
    finally:
        cache.close()
    finished = [manifest.ask_of(key) for key in manifest.planned if key in done]
    texts = [done[key][0] for key in manifest.planned if key in done]
    source = f"{manifest.model} @ {manifest.endpoint}"
    writings, duplicates = write_pool_of([(ask, t) for (ask, _), t in zip(finished, texts, strict=True)], source, out)
    report = ImportReport(
        model=manifest.model,
        endpoint=manifest.endpoint,
        requests=str(requests),
        results=str(results),
        out=str(out),
        cache=str(cache_dir),
        requested=len(manifest.requests),
        lines=lines,
        stored=stored.stored,
        already_cached=stored.already_cached,
        duplicated=duplicated,
        conflicting=tuple(conflicting),
        failed=tuple(failed),
        missing=tuple(missing),
        prompt_tokens=stored.prompt_tokens,
        completion_tokens=stored.completion_tokens,
        cost_usd=cost_usd(price, stored.prompt_tokens, stored.completion_tokens),
        writings=len(writings),
        duplicates=duplicates,
        asks=len({w.ask for w in writings}),
        tokens=sum(w.n_tokens for w in writings),
    )
    write_text_atomic(build_report_path(out), report.model_dump_json(indent=2) + "\n")
    write_quality_report(out, writing_reference(), GPT4O_REFERENCE, compare=compare)
    return report
