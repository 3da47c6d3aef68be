"""A folder of Batch API batches and its record (`batches.json`), for any consumer whose requests
are lines keyed by `custom_id` (`mrcr-eval --batch`, pool builds).

The consumer adds request lines (`BatchFolder.writer`), which are split into parts no larger than
the API's limits (`BatchLimits`); `submit` uploads each part and makes it a batch, writing the
record as soon as the API gives each id; `poll` checks the batches (the interval doubling up to a
cap) and downloads the output and error files of those that ended; `ended` reads them (the rules
of `read_output`) into one outcome per request, a request that no file answers being an error
(expired: `EXPIRED`; failed, cancelled or torn: `BATCH_FAILED`), which the consumer records and
a rerun resends. A file uploaded by a process killed before it recorded its batch is looked up
among the account's latest batches (adopted) before a batch is made of it: nothing is sent twice.

A reply is paid once: every HTTP-200 reply downloaded stays usable (`kept`) after its part is
recorded, for a request of the same id the consumer did not use it for yet (a row outside a
narrower rerun's selection, a row of the same content). A part never uploaded is the
consumer's to rebuild (`drop_unsent`): no batch can have been made of it. A batch or file the
server no longer has (HTTP 404) makes its part `vanished`: the outcomes already downloaded are
kept, its other requests have none (the consumer sends them again), never an error that blocks
every rerun; an uploaded file gone before its batch was made is uploaded again. Once a batch
ended and its files are downloaded, its input, output and error files are deleted from the
account (`keep_files` keeps them); the next `submit` deletes those a killed or keeping run left.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from .._files import atomic_path, write_text_atomic
from .._openai import ChatError, api_call
from ._lines import BATCH_FAILED, CHAT_URL, EXPIRED, BatchError, Outcome, OutputRead, read_outputs

#: The Batch API's limits on one input file (https://platform.openai.com/docs/guides/batch).
MAX_BATCH_REQUESTS = 50_000
MAX_BATCH_BYTES = 200_000_000
COMPLETION_WINDOW = "24h"
#: Seconds before the first status check of the batches; the interval doubles up to the cap.
POLL_FIRST_S = 10.0
POLL_CAP_S = 600.0
STATE_NAME = "batches.json"
TERMINAL = frozenset({"completed", "expired", "failed", "cancelled"})


@dataclass(frozen=True)
class BatchLimits:
    """How requests are split into batches and how often they are polled (tests make them small)."""

    max_requests: int = MAX_BATCH_REQUESTS
    max_bytes: int = MAX_BATCH_BYTES
    poll_first_s: float = POLL_FIRST_S
    poll_cap_s: float = POLL_CAP_S


class Part(BaseModel):
    """One batch: its requests in FOLDER/NAME.requests.jsonl (until the batch is made) and their
    custom ids in NAME.ids, then what the API said of it and the files downloaded."""

    name: str
    requests: int
    bytes: int
    input_file_id: str | None = None
    batch_id: str | None = None
    status: str | None = None
    failure: str | None = None  # why the batch failed (its `errors`), if it did
    output: str | None = None  # the downloaded output file, in FOLDER
    errors: str | None = None  # the downloaded error file
    done: bool = False  # ended, and its files are downloaded
    graded: bool = False  # its outcomes are recorded by the consumer
    vanished: bool = False  # the server no longer has its batch or a file of it (HTTP 404)
    files_deleted: bool = False  # its input, output and error files are deleted from the account


class BatchState(BaseModel):
    parts: list[Part] = []


@dataclass
class Ended:
    """The outcomes of the batches that ended and are not recorded yet, those parts, and what was
    wrong with their files (one line each)."""

    outcomes: dict[str, Outcome] = field(default_factory=dict)
    parts: list[Part] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


class PartWriter:
    """Writes request lines into parts no larger than the limits (call it from one thread);
    `close` puts the last one in place and records every part."""

    def __init__(self, batches: BatchFolder):
        self.batches = batches
        self.made: list[Part] = []
        self._handle: Any = None
        self._ids: list[str] = []
        self._bytes = 0

    def _finish(self) -> None:
        if self._handle is None:
            return
        self._handle.close()
        batches = self.batches
        part = Part(name=self._name, requests=len(self._ids), bytes=self._bytes)
        write_text_atomic(batches.ids_path(part), "".join(f"{i}\n" for i in self._ids))
        Path(self._partial).replace(batches.requests_path(part))
        batches.state.parts.append(part)
        batches.save()
        self.made.append(part)
        self._handle, self._ids, self._bytes = None, [], 0

    def add(self, custom_id: str, data: bytes) -> bool:
        """Add one request line; False when it alone is over the byte limit (it is not written)."""
        limits = self.batches.limits
        if len(data) > limits.max_bytes:
            return False
        if self._handle is not None and (
            len(self._ids) >= limits.max_requests or self._bytes + len(data) > limits.max_bytes
        ):
            self._finish()
        if self._handle is None:
            folder = self.batches.folder
            folder.mkdir(parents=True, exist_ok=True)
            self._name = self.batches.next_name()
            self._partial = folder / f".{self._name}.requests.jsonl.partial"
            self._handle = open(self._partial, "wb")  # noqa: SIM115 - closed in _finish
        self._handle.write(data)
        self._ids.append(custom_id)
        self._bytes += len(data)
        return True

    def close(self) -> list[Part]:
        self._finish()
        return self.made


class KeptReplies:
    """The HTTP-200 replies of the ended parts of a `BatchFolder`, by custom id (`get`): a part's
    files are read the first time one of its ids is asked for, once."""

    def __init__(self, batches: BatchFolder):
        self.batches = batches
        self._where: dict[str, list[Part]] | None = None
        self._read: dict[str, OutputRead] = {}

    def get(self, custom_id: str) -> Outcome | None:
        if self._where is None:
            self._where = {}
            for part in self.batches.state.parts:
                if part.done:
                    for known in self.batches.part_ids(part):
                        self._where.setdefault(known, []).append(part)
        for part in self._where.get(custom_id, ()):
            if part.name not in self._read:
                names = [n for n in (part.errors, part.output) if n is not None]
                self._read[part.name] = read_outputs([self.batches.folder / n for n in names], part.batch_id)
            outcome = self._read[part.name].outcomes.get(custom_id)
            if outcome is not None and outcome.ok:
                return outcome
        return None


def _lost(part: Part, read: OutputRead) -> Outcome:
    """The outcome of a request of an ended batch that none of its files answers."""
    if part.status == "expired":
        return Outcome(error="the batch expired before this request ran", code=EXPIRED, batch_id=part.batch_id)
    if part.status == "completed" and read.torn:
        why = f"batch {part.batch_id} completed, but its line for this request is not readable ({len(read.torn)} torn)"
    else:
        why = (
            f"batch {part.batch_id} {part.status}{f': {part.failure}' if part.failure else ''}; the request did not run"
        )
    return Outcome(error=why, code=BATCH_FAILED, batch_id=part.batch_id)


class BatchFolder:
    """The batches of one job in `folder`, recorded in FOLDER/batches.json (see the module
    docstring). `endpoint` is the URL every request line names; `label` the metadata key that
    names a part in its batch. BatchError when the record is not readable."""

    def __init__(
        self,
        folder: Path,
        limits: BatchLimits = BatchLimits(),
        *,
        endpoint: str = CHAT_URL,
        label: str = "mrcr_part",
        keep_files: bool = False,
    ):
        self.folder, self.limits, self.endpoint, self.label = Path(folder), limits, endpoint, label
        self.keep_files = keep_files
        self.notes: list[str] = []  # what happened to the batches that a user should know (vanished ones)
        path = self.folder / STATE_NAME
        try:
            self.state = (
                BatchState.model_validate_json(path.read_text(encoding="utf-8")) if path.exists() else BatchState()
            )
        except (ValueError, ValidationError, OSError):
            raise BatchError(f"{path} is not a batch record this mrcr-gen can read") from None

    def save(self) -> None:
        write_text_atomic(self.folder / STATE_NAME, self.state.model_dump_json(indent=2) + "\n")

    def ids_path(self, part: Part) -> Path:
        return self.folder / f"{part.name}.ids"

    def requests_path(self, part: Part) -> Path:
        return self.folder / f"{part.name}.requests.jsonl"

    def part_ids(self, part: Part) -> list[str]:
        return self.ids_path(part).read_text(encoding="utf-8").split()

    def next_name(self) -> str:
        numbers = [int(part.name.rsplit("-", 1)[-1]) for part in self.state.parts]
        return f"part-{max(numbers, default=0) + 1:04d}"

    def drop_unsent(self) -> list[Part]:
        """Forget the parts never uploaded (written by a run that ended before it uploaded them), so
        the consumer writes the requests of its own selection instead: no batch can have been
        made of them. Returns them."""
        unsent = [part for part in self.state.parts if part.input_file_id is None and part.batch_id is None]
        if unsent:
            self.state.parts = [part for part in self.state.parts if part not in unsent]
            self.save()
            for part in unsent:
                self.requests_path(part).unlink(missing_ok=True)
                self.ids_path(part).unlink(missing_ok=True)
        return unsent

    def writer(self) -> PartWriter:
        return PartWriter(self)

    def pending(self) -> list[Part]:
        """The parts whose batch has not ended (or not been made) yet."""
        return [part for part in self.state.parts if not part.done]

    def waiting_ids(self) -> set[str]:
        """The custom ids of every batch that has not ended (or not been made) yet."""
        return {custom_id for part in self.pending() for custom_id in self.part_ids(part)}

    def ended(self) -> Ended:
        """The outcomes of the batches that ended and are not recorded yet (a reply wins over an
        error; a request no file answers is an error); `mark_recorded` once the consumer has them."""
        ended = Ended(parts=[part for part in self.state.parts if part.done and not part.graded])
        for part in ended.parts:
            read = read_outputs([self.folder / n for n in (part.errors, part.output) if n is not None], part.batch_id)
            ids = self.part_ids(part)
            foreign = read.foreign_to(ids)
            ended.problems += read.problems()
            ended.problems += [f"{part.name}: a line for {c}, which the batch never had; ignored" for c in foreign]
            lost = None if part.vanished else _lost(part, read)  # a vanished part's other requests: resent
            for custom_id in ids:
                outcome = read.outcomes.get(custom_id, lost)
                if outcome is None:
                    continue
                known = ended.outcomes.get(custom_id)
                if known is None or (outcome.ok and not known.ok):
                    ended.outcomes[custom_id] = outcome
        return ended

    def mark_recorded(self, parts: list[Part]) -> None:
        """Note that every outcome of these parts is recorded by the consumer."""
        for part in parts:
            part.graded = True
        self.save()

    def kept(self) -> KeptReplies:
        """The HTTP-200 replies of every ended part, recorded or not, found by custom id."""
        return KeptReplies(self)

    async def submit(self, client: Any, *, max_retries: int) -> tuple[int, int]:
        """Upload each part not uploaded yet and make each uploaded part a batch (or adopt the one a
        killed run made), recording each id at once; (batches, requests) submitted now. An uploaded
        file the server no longer has (404) is uploaded again from the part's requests. First, the
        files of batches collected by a run killed before it deleted them are deleted."""
        await self._delete_left_files(client, max_retries)
        batches = requests = 0
        for part in self.state.parts:
            if part.batch_id is not None:
                continue
            adopted: Any = None
            if part.input_file_id is not None:
                adopted = await _adopted(client, part.input_file_id, max_retries)
            batch: Any = adopted
            if batch is None:
                batch = await self._made(client, part, max_retries)
            part.batch_id, part.status = batch.id, batch.status
            self.save()
            self.requests_path(part).unlink(missing_ok=True)  # the API holds it now
            if adopted is None:
                batches, requests = batches + 1, requests + part.requests
        return batches, requests

    async def _upload(self, client: Any, part: Part, max_retries: int) -> None:
        upload = functools.partial(client.files.create, file=self.requests_path(part), purpose="batch")
        part.input_file_id = (await api_call(upload, max_retries=max_retries)).id
        self.save()

    async def _made(self, client: Any, part: Part, max_retries: int) -> Any:
        """A new batch of the part (uploaded first if it is not, or if its file vanished)."""
        for attempt in range(2):
            if part.input_file_id is None:
                await self._upload(client, part, max_retries)
            try:
                return await api_call(self._creator(client, part, max_retries), max_retries=max_retries)
            except ChatError as exc:
                if exc.status != 404 or attempt or not self.requests_path(part).exists():
                    raise
                self.notes.append(f"{part.name}: uploaded file {part.input_file_id} is gone (404); uploaded again")
                part.input_file_id = None
        raise AssertionError("unreachable")

    def _creator(self, client: Any, part: Part, max_retries: int) -> Callable[[], Any]:
        """The call that makes `part` a batch. A retry first looks for the batch an earlier attempt
        made (a timeout or a lost connection after the API made it): a batch made twice bills twice."""
        attempts = 0

        async def create() -> Any:
            nonlocal attempts
            attempts += 1
            made = None if attempts == 1 else await _adopted(client, str(part.input_file_id), max_retries)
            return made or await client.batches.create(
                input_file_id=part.input_file_id,
                endpoint=self.endpoint,
                completion_window=COMPLETION_WINDOW,
                metadata={self.label: part.name},
            )

        return create

    async def poll(
        self, client: Any, *, wait: bool, max_retries: int, on_status: Callable[[str], None] | None = None
    ) -> None:
        """Check every batch that has not ended, downloading the files of those that have; with
        `wait`, again (the interval doubling up to `poll_cap_s`) until all have ended."""
        delay = self.limits.poll_first_s
        while True:
            for part in self.pending():
                if part.batch_id is not None:
                    await self._check(client, part, max_retries, on_status)
            if not wait or not self.pending():
                return
            await asyncio.sleep(delay)
            delay = min(self.limits.poll_cap_s, delay * 2)

    async def _check(self, client: Any, part: Part, max_retries: int, on_status: Callable[[str], None] | None) -> None:
        try:
            batch = await api_call(functools.partial(client.batches.retrieve, part.batch_id), max_retries=max_retries)
        except ChatError as exc:
            if exc.status != 404:
                raise
            # The Batches API answers (not a wrong URL, where every path is a 404): the batch is gone.
            await api_call(lambda: client.batches.list(limit=1), max_retries=max_retries)
            self._vanish(part, f"batch {part.batch_id} is gone from the server (404)")
            return
        part.status = batch.status
        if batch.status in TERMINAL:
            part.failure = _failure(batch)
            try:
                for kind, file_id in (("output", batch.output_file_id), ("errors", batch.error_file_id)):
                    if file_id and getattr(part, kind) is None:
                        target = self.folder / f"{part.name}.{kind}.jsonl"
                        setattr(part, kind, await _download(client, file_id, target, max_retries))
                        self.save()
            except ChatError as exc:
                if exc.status != 404:
                    raise
                self._vanish(part, f"a file of batch {part.batch_id} is gone from the server (404)")
                return
            part.done = True
            self.save()
            await self._delete_files(client, part, batch, max_retries)
        self.save()
        if on_status is not None:
            counts = batch.request_counts
            done = f" ({counts.completed} done, {counts.failed} failed of {counts.total})" if counts else ""
            on_status(f"batch {part.batch_id} ({part.name}): {batch.status}{done}")

    def _vanish(self, part: Part, why: str) -> None:
        """The part's batch or a file of it is gone: what was downloaded is kept, its other
        requests have no outcome (the consumer sends them again)."""
        part.done = part.vanished = True
        part.status, part.failure = part.status or "vanished", why
        self.save()
        self.notes.append(f"{part.name}: {why}; its requests without a downloaded reply are sent again")

    async def _delete_left_files(self, client: Any, max_retries: int) -> None:
        """Delete the files of every collected batch whose files are still in the account (a run
        killed between collecting it and deleting them, or one that kept them: `keep_files`)."""
        for part in self.state.parts:
            if self.keep_files or not part.done or part.vanished or part.files_deleted or part.batch_id is None:
                continue
            try:
                batch = await api_call(functools.partial(client.batches.retrieve, part.batch_id), max_retries=1)
            except ChatError as exc:  # hygiene, not the run's work: said (unless gone), not tried again
                if exc.status != 404:
                    self.notes.append(f"{part.name}: cannot look up batch {part.batch_id} to delete its files: {exc}")
                part.files_deleted = True
                self.save()
                continue
            await self._delete_files(client, part, batch, max_retries)

    async def _delete_files(self, client: Any, part: Part, batch: Any, max_retries: int) -> None:
        """Delete the batch's files from the account once they are downloaded and recorded (the run
        folder holds their content); a file already gone is not an error, a failure is a note."""
        if self.keep_files or part.files_deleted:
            return
        for file_id in (part.input_file_id, batch.output_file_id, batch.error_file_id):
            if file_id:
                try:  # hygiene, not the run's work: one retry, and a failure is only said
                    await api_call(functools.partial(client.files.delete, file_id), max_retries=min(max_retries, 1))
                except ChatError as exc:
                    if exc.status != 404:
                        self.notes.append(f"{part.name}: could not delete file {file_id} from the account: {exc}")
        part.files_deleted = True
        self.save()


async def _download(client: Any, file_id: str, target: Path, max_retries: int) -> str:
    async def fetch() -> None:
        async with client.files.with_streaming_response.content(file_id) as response:
            with atomic_path(target) as tmp, open(tmp, "wb") as handle:
                async for chunk in response.iter_bytes():
                    handle.write(chunk)

    await api_call(fetch, max_retries=max_retries)
    return target.name


async def _adopted(client: Any, input_file_id: str, max_retries: int) -> Any:
    """The batch already made of this uploaded file (by a run killed before it recorded it), if any
    of the account's 100 latest batches is."""
    page = await api_call(lambda: client.batches.list(limit=100), max_retries=max_retries)
    return next((batch for batch in page.data if batch.input_file_id == input_file_id), None)


def _failure(batch: Any) -> str | None:
    errors = getattr(getattr(batch, "errors", None), "data", None) or []
    messages = [f"{e.code}: {e.message}" if e.code else str(e.message) for e in errors]
    return "; ".join(messages) or None
