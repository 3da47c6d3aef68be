"""`mrcr-gen pool import-results`: the output file of a `pool export-requests` file (from `vllm
run-batch` or the Batch API) into the writings cache, then the pool of every planned writing.

An output file is read against its request set's manifest by the core's reader
(`mrcr_gen.batch.read_output`, the rules `mrcr-eval batch import` follows). What cannot be trusted
is refused before anything is written (exit 2): the request file given as the output, a file with
no output line, a custom_id the request file never had, a reply of another model (a dated snapshot
of the model is the model: `same_model`). What can be is reported, never silently used: requests
with no line (missing; a torn line's request is one), lines that failed, a custom_id answered
twice with replies that differ (conflicting: neither is stored) and twice the same (duplicated:
stored once, costed once), each only when the cache lacks its writing (`sort_gaps`). A reply
already in the cache is not stored again; it is costed when the cache holds it word for word (an
import run again, or one killed after the cache's commit, reports what the first did). Missing and
failed writings are requested again by exporting again.

The file's replies in the cache are costed by the usage ledger (`mrcr_gen._usage`): at `--price-in` and
`--price-out` as given, or at the model's list price at the Batch API's discount (`results_price`).
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from ..._files import write_text_atomic
from ..._models import _Frozen
from ..._usage import cost
from ...batch import BatchError, OutputRead, read_output, reply_models, same_model
from ...pool._batchfiles import RequestSet, ledger_price, read_manifest, store_replies
from ...pool._cache import WritingCache, default_cache_dir
from ...pool._pool import PoolError, write_pool_of
from ...pool._quality import write_quality_report
from ._catalog import writing_reference
from ._pool_llm import GPT4O_REFERENCE, Failure, _one_build_per_pool, build_report_path


class ImportReport(_Frozen):
    model: str
    endpoint: str
    requests: str
    results: str
    out: str
    cache: str
    requested: int  # lines of the request file
    torn: tuple[str, ...]  # "file:line" of lines that are not output lines (their requests: missing)
    stored: int  # writings written into the cache now
    already_cached: int  # replies the cache held already (not stored again)
    earlier: int = 0  # of those, this file's very replies (an earlier import): costed as it costed them
    duplicated: int  # extra lines repeating a custom_id's reply (used once)
    conflicting: tuple[str, ...]  # asks (variant) answered twice with different texts: not stored
    failed: tuple[Failure, ...]
    missing: tuple[str, ...]  # asks (variant) with no line in the output
    prompt_tokens: int
    completion_tokens: int
    reasoning_tokens: int
    cached_tokens: int
    price_per_1m: dict[str, Any] | None  # the usage ledger's price of these lines (`results_price`)
    cost_usd: float | None
    writings: int
    duplicates: int  # identical (ask, text) writings merged in the pool
    asks: int
    tokens: int

    def summary_lines(self) -> list[str]:
        spent = "unknown (pass --price-in/--price-out)" if self.cost_usd is None else f"${self.cost_usd:,.4f}"
        if self.price_per_1m and "batch_discount" in self.price_per_1m:
            spent += " (list price at the Batch API's discount)"
        lines = [
            f"pool {self.out}: {self.writings:,} distinct writings for {self.asks:,} asks, "
            f"{self.tokens:,} o200k tokens",
            f"{self.results}: {self.requested:,} requests of {self.model} ({self.endpoint}): {self.stored:,} stored, "
            f"{self.already_cached:,} already cached, {self.duplicated} duplicated lines, "
            f"{len(self.conflicting)} conflicting, {len(self.failed)} failed, {len(self.missing)} missing",
            f"usage of the file's replies in the cache ({self.stored:,} stored now, {self.earlier:,} by an earlier "
            f"import): {self.prompt_tokens:,} prompt + {self.completion_tokens:,} completion tokens; "
            f"estimated cost {spent}",
        ]
        lines += [f"warning: {where}: not a batch output line (torn or corrupted); ignored" for where in self.torn[:5]]
        lines += [f"conflicting: {what}" for what in self.conflicting[:5]]
        lines += [f"failed: '{f.ask}' variant {f.variant}: {f.error}" for f in self.failed[:5]]
        lines += [f"missing: {what}" for what in self.missing[:5]]
        if self.conflicting or self.failed or self.missing:
            lines.append("export the requests again to ask for the writings that are not in the cache")
        return lines


def read_results(results: str | os.PathLike, manifest: RequestSet) -> OutputRead:
    """The outcomes of an output file, read by the core's reader (`mrcr_gen.batch.read_output`);
    PoolError for a file that does not answer this request set: the request file itself, no output
    line at all, a custom_id the request file never had, or a reply of another model."""
    try:
        read = read_output(results)
    except BatchError as exc:
        raise PoolError(str(exc)) from None
    if not read.outcomes:
        raise PoolError(f"{results} has no batch output line (JSON with custom_id and response): not an output file")
    foreign = read.foreign_to(manifest.requests)
    if foreign:
        more = f" (and {len(foreign) - 1} more)" if len(foreign) > 1 else ""
        raise PoolError(
            f"{results}: custom_id {foreign[0]!r}{more} is not in the request file: an output of another request set?"
        )
    others = sorted(model for model in reply_models(read) if not same_model(model, manifest.model))
    if others:
        raise PoolError(f"{results}: replies of {others[0]!r}, not {manifest.model!r}: an output of another model?")
    return read


def _label(manifest: RequestSet, custom_id: str) -> str:
    ask, variant = manifest.requests[custom_id]
    return f"'{ask}' variant {variant}"


def replies_of(read: OutputRead) -> list[tuple[str, Any]]:
    """(custom_id, body) of every reply to store: a custom_id answered with replies that differ is
    stored from none of them."""
    return [(key, outcome.body) for key, outcome in read.outcomes.items() if outcome.ok and key not in read.conflicts]


def sort_gaps(read: OutputRead, manifest: RequestSet, done: Collection[str]) -> tuple[list, list, list]:
    """(conflicting, failed, missing) of an output file's requests whose writing the cache lacks
    (`done`: the keys it holds once the replies are stored). A request the file leaves unanswered
    but whose writing is in the cache (an earlier import of another output) is in the pool: no gap."""
    conflicting = [_label(manifest, key) for key in read.conflicts if key not in done]
    failed = [
        Failure(ask=manifest.requests[key][0], variant=manifest.requests[key][1], error=outcome.error or "failed")
        for key, outcome in read.outcomes.items()
        if not outcome.ok and key not in read.conflicts and key not in done
    ]
    missing = [_label(manifest, key) for key in manifest.requests if key not in read.outcomes and key not in done]
    return conflicting, failed, missing


def held_elsewhere(manifest: RequestSet, done: Mapping[str, Any]) -> list[str]:
    """The planned writings left out of the request file because batches held them when it was
    exported, and still not in the cache: not in the pool, so reported."""
    return [
        f"'{ask}' variant {variant} (in batches not collected when exported)"
        for key, (ask, variant) in manifest.planned.items()
        if key not in done and key not in manifest.requests
    ]


def results_price(model: str, price_in: float | None, price_out: float | None) -> dict[str, Any] | None:
    """The ledger price of imported lines: `--price-in`/`--price-out` as given (what these lines
    cost: a local model has no list price), else the model's list price at the Batch API's discount."""
    return ledger_price(model, price_in, price_out, discounted=price_in is None and price_out is None)


@_one_build_per_pool
def import_results(
    results: str | os.PathLike,
    requests: str | os.PathLike,
    out: str | os.PathLike,
    *,
    cache_dir: str | os.PathLike | None = None,
    price: dict[str, Any] | None = None,
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
    read = read_results(results, manifest)
    cache_dir = Path(cache_dir or default_cache_dir())
    stored = store_replies(manifest, replies_of(read), cache_dir)
    cache = WritingCache(cache_dir)
    try:
        done = cache.get_many(list(manifest.planned))
    finally:
        cache.close()
    conflicting, failed, missing = sort_gaps(read, manifest, done)
    missing += held_elsewhere(manifest, done)
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
        torn=tuple(read.torn),
        stored=stored.stored,
        already_cached=stored.already_cached,
        earlier=stored.earlier,
        duplicated=read.duplicates,
        conflicting=tuple(conflicting),
        failed=tuple(failed),
        missing=tuple(missing),
        **stored.usage.as_record(),
        price_per_1m=price,
        cost_usd=None if price is None else cost(price, stored.usage)["cost_usd"],
        writings=len(writings),
        duplicates=duplicates,
        asks=len({w.ask for w in writings}),
        tokens=sum(w.n_tokens for w in writings),
    )
    write_text_atomic(build_report_path(out), report.model_dump_json(indent=2) + "\n")
    write_quality_report(out, writing_reference(), GPT4O_REFERENCE, compare=compare)
    return report
