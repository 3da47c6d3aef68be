"""`pool build --batch`: the writings a pool plans and the cache lacks, through the OpenAI Batch API,
on the core's batch machinery (`mrcr_gen.batch.BatchFolder`).

The batches of a pool live beside it, in `<pool>.batches/` (`batches_path`): its record
`batches.json` (every part, upload and batch id, written as soon as the API gives each), and
`writings.json`, the model, endpoint and parameters of its requests and which (ask, variant) each
custom_id is (the writing's cache key), written before any request line is. The folder belongs to
the build of that pool, which holds the pool's lock: a second build of it is refused. A rerun with
another model, endpoint or parameters is refused too (its writings would be keyed otherwise).

One pass (`PoolBatches.collect`, then `send`): the replies of the batches that ended are stored in
the cache in one transaction and only then their parts marked recorded, so a kill between the two
stores nothing twice (a reply already in the cache is skipped) and costs nothing twice (the cost is
that of the folder's reply lines, `totals`, read from its files: what the batches billed). A failed,
expired or unusable reply is a failure, not sent again by this command; a rerun sends it again.
Every (ask, variant) neither in the cache nor in a batch still running (this build's, or another's
of the same cache: `_inflight`), nor attempted by this command, is written into new request files;
one in another build's batches counts as waiting (`Progress.elsewhere`). Nothing in the cache is
sent; nothing is sent twice.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._files import write_text_atomic
from .._models import _Frozen
from .._usage import Usage, from_openai
from ..batch import STATE_NAME, BatchError, BatchFolder, BatchLimits, encoded_line, read_outputs, request_line
from ._batchfiles import Checked, WritingRequests, checked_reply, store_checked, writing_body
from ._cache import WritingCache
from ._inflight import in_other_batches, register_folder
from ._pool import PoolError

RECORD_NAME = "writings.json"
Job = tuple[Any, int, str]  # (the request: an Ask, or anything with the request's `text`; variant; cache key)


def batches_path(out: str | os.PathLike) -> Path:
    """`pool.parquet` -> `pool.batches/`, beside the pool: the batches of its build."""
    out = Path(out)
    return out.with_name(out.name.removesuffix(".parquet") + ".batches")


def running_requests(out: str | os.PathLike) -> int:
    """The requests of the pool at `out` in batches that have not ended (or not been made): an
    online build of it would send them again."""
    folder = batches_path(out)
    if not (folder / STATE_NAME).is_file():
        return 0
    try:
        return sum(part.requests for part in BatchFolder(folder).pending())
    except BatchError:  # a record no build can continue: `pool build --batch` refuses it
        return 0


def refuse_held_writings(cache_dir: str | os.PathLike, keys: Sequence[str]) -> None:
    """PoolError when batches not collected yet hold some of the writings `keys` (an online request
    would pay for them twice)."""
    held = in_other_batches(cache_dir)
    found = [held[key] for key in keys if key in held]
    if found:
        raise PoolError(
            f"{len(found):,} of these writings are in batches not collected yet ({found[0]}): "
            "collect them first by rerunning the batch build that made them"
        )


@dataclass
class Progress:
    """What the batch passes of one command did, and what is still out."""

    stored: int = 0  # writings stored in the cache now
    sent: int = 0  # requests submitted now
    batches: int = 0  # batches made now
    waiting: int = 0  # requests in batches still running
    failures: list[tuple[str, int, str]] = field(default_factory=list)  # (request text, variant, error)
    problems: list[str] = field(default_factory=list)  # torn, duplicated, conflicting lines
    elsewhere: dict[str, Path] = field(default_factory=dict)  # custom_id -> another build's batches holding it


def elsewhere_note(progress: Progress) -> str:
    """`; N of them in the batches of FOLDER (collect them with the build that made them)`, or ''."""
    if not progress.elsewhere:
        return ""
    folders = sorted({str(folder) for folder in progress.elsewhere.values()})
    more = f" and {len(folders) - 1} more" if len(folders) > 1 else ""
    return (
        f"; {len(progress.elsewhere):,} of them in the batches of {folders[0]}{more}, not sent again: "
        "rerun the build that made them to collect them"
    )


class Totals(_Frozen):
    """The reply lines every ended batch of the pool billed, and their usage."""

    batches: int
    lines: int  # reply lines (each billed once)
    failed_lines: int  # requests that failed or expired
    usage: dict[str, int]


class PoolBatches:
    """The batches of one pool build (see the module docstring). PoolError when the folder is not
    one this build can continue."""

    def __init__(
        self,
        folder: Path,
        model: str,
        endpoint: str,
        params: dict[str, Any],
        limits: BatchLimits,
        record_type: type[WritingRequests] = WritingRequests,
    ):
        try:
            self.folder = BatchFolder(folder, limits, label="mrcr_pool_part")
        except BatchError as exc:
            raise PoolError(f"{exc}; choose another --out") from None
        self.record_path = folder / RECORD_NAME
        self.record_type = record_type  # its `ask_of` gives what the cache stores as each writing's request
        self.record = record_type(model=model, endpoint=endpoint, params=params, requests={})
        if self.record_path.exists():
            self.record = self._recorded(model, endpoint, params)
        elif folder.exists() and any(not path.name.endswith(".partial") for path in folder.iterdir()):
            raise PoolError(f"{folder} holds files this command did not write; choose another --out")
        else:  # the folder's first file: it is this build's from now on
            self._save_record()
        self.attempted: set[str] = set()  # sent, stored or failed by this command: not sent again by it

    def _save_record(self) -> None:
        write_text_atomic(self.record_path, self.record.model_dump_json(indent=1) + "\n")

    def _recorded(self, model: str, endpoint: str, params: dict[str, Any]) -> WritingRequests:
        try:
            record = self.record_type.model_validate_json(self.record_path.read_text(encoding="utf-8"))
        except (ValueError, OSError):
            raise PoolError(f"{self.record_path} is not a record of `mrcr-gen pool build --batch`") from None
        asked: dict[str, Any] = {"model": model, "endpoint": endpoint, "params": params}
        if record.model_dump(include=set(asked)) != asked and not self.folder.state.parts:
            self._save_record()  # no batch was made of the recorded options: nothing to collect, a fresh record
            return self.record
        if record.model_dump(include=set(asked)) != asked:
            raise PoolError(
                f"{self.record_path.parent} holds the batches of {record.model} at {record.endpoint} with "
                f"parameters {record.params}: rerun with those options to collect them, or choose another --out"
            )
        return record

    def collect(self, cache_dir: str | os.PathLike, progress: Progress) -> None:
        """Store the replies of the batches that ended (in one transaction), then mark them recorded."""
        ended = self.folder.ended()
        progress.problems += ended.problems
        checked: list[Checked] = []
        for custom_id, outcome in sorted(ended.outcomes.items()):
            self.attempted.add(custom_id)
            text, variant = self.record.requests[custom_id]
            if not outcome.ok:
                progress.failures.append((text, variant, f"{outcome.code or 'failed'}: {outcome.error}"))
                continue
            try:
                checked.append(checked_reply(self.record, custom_id, outcome.body))
            except PoolError as exc:
                progress.failures.append((text, variant, str(exc)))
        progress.stored += store_checked(self.record, checked, cache_dir).stored
        if ended.parts:
            self.folder.mark_recorded(ended.parts)

    def send(self, jobs: Sequence[Job], cache_dir: str | os.PathLike, progress: Progress) -> None:
        """Write every job neither cached, nor in a running batch, nor attempted now into request files."""
        cache = WritingCache(cache_dir)
        try:
            cached = cache.get_many([key for _, _, key in jobs])
        finally:
            cache.close()
        others = in_other_batches(cache_dir, besides=self.folder.folder)
        progress.elsewhere = {key: others[key] for _, _, key in jobs if key in others and key not in cached}
        skip = cached.keys() | self.folder.waiting_ids() | self.attempted | progress.elsewhere.keys()
        todo = [job for job in jobs if job[2] not in skip]
        if not todo:
            return
        register_folder(cache_dir, self.folder.folder)  # before any request line: others leave them out
        requests = self.record.requests | {key: (ask.text, variant) for ask, variant, key in todo}
        self.record = self.record.model_copy(update={"requests": requests})
        self._save_record()  # before any request line
        parts = self.folder.writer()
        record = self.record
        for ask, variant, key in todo:
            self.attempted.add(key)
            line = encoded_line(request_line(key, writing_body(record.model, ask.text, record.params)))
            if not parts.add(key, line):
                limit = self.folder.limits.max_bytes
                progress.failures.append((ask.text, variant, f"the request is over the {limit} bytes of a batch file"))
        parts.close()

    def totals(self) -> Totals:
        """The reply lines of every batch that ended, read from its files (what the batches billed)."""
        usage, lines, failed = Usage(), 0, 0
        ended = [part for part in self.folder.state.parts if part.done]
        for part in ended:
            names = [name for name in (part.errors, part.output) if name is not None]
            read = read_outputs([self.folder.folder / name for name in names], part.batch_id)
            for outcome in read.outcomes.values():
                if outcome.ok and outcome.body is not None:
                    lines += 1
                    usage += from_openai(outcome.body.get("usage"))
            failed += part.requests - sum(1 for o in read.outcomes.values() if o.ok)
        return Totals(batches=len(ended), lines=lines, failed_lines=failed, usage=usage.as_record())


async def run_batches(
    batches: PoolBatches,
    jobs: Sequence[Job],
    cache_dir: str | os.PathLike,
    client: Any,
    *,
    wait: bool,
    max_retries: int,
    on_status: Callable[[str], None] | None = None,
) -> Progress:
    """Collect, send, submit and poll until every batch has ended (or, `wait` false, once polled);
    ChatError when the API fails for good (rerun to continue: nothing is sent twice)."""
    import asyncio

    progress = Progress()
    folder = batches.folder
    polled = False
    while True:
        await asyncio.to_thread(batches.collect, cache_dir, progress)
        await asyncio.to_thread(batches.send, jobs, cache_dir, progress)
        made, requests = await folder.submit(client, max_retries=max_retries)
        progress.batches += made
        progress.sent += requests
        if not folder.pending() or (polled and not wait):
            break
        await folder.poll(client, wait=wait, max_retries=max_retries, on_status=on_status)
        polled = True
    progress.waiting = sum(part.requests for part in folder.pending()) + len(progress.elsewhere)
    progress.problems += folder.notes  # vanished batches and files, files not deleted
    return progress


class BatchFigures(_Frozen):
    """The batch side of a pool's build report: its batches and their reply lines (all of them,
    every invocation of the build: what the batches billed), priced at the Batch API's discount."""

    folder: str
    batches: int  # batches that ended
    lines: int  # reply lines billed
    failed_lines: int  # requests that failed or expired (not billed; resent by a rerun)
    sent_now: int  # requests submitted by this invocation
    price_per_1m: dict[str, Any] | None  # the ledger's price: the list price at the batch discount

    def summary_lines(self, report: Any, cost_text: str) -> list[str]:
        return [
            f"model {report.model} at {report.endpoint} through the Batch API: {report.written:,} written now, "
            f"{report.cached:,} from cache, {len(report.failed)} failed; {self.sent_now:,} requests sent now",
            f"{self.batches} batches in {self.folder}: {self.lines:,} reply lines billed "
            f"({report.prompt_tokens:,} prompt + {report.completion_tokens:,} completion tokens), "
            f"{self.failed_lines:,} failed or expired lines; cost at the batch discount {cost_text}",
        ]
