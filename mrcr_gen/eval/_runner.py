"""`mrcr-eval`: score any OpenAI-compatible model on MRCR files, resumably, the official way.

Scoring policy (the official loop's): every row that got an HTTP 200 is graded, whatever its
content; empty or `null` content scores 0 and is not retried. Only transport failures (429,
5xx, timeouts, connection errors, a body that is not a chat completion) are retried. A row whose
retries run out is an error: it counts as 0 in `mean_score`, marks the run incomplete, and a
rerun sends it again. 401/403/404 or an unknown model stop the run: requests in flight are
awaited and recorded, nothing more is sent (`EvalFatal`).

Each finished row is appended to RUN_DIR/results.jsonl (flushed at once, fsynced by a thread
behind the event loop) with the digest of its content, the settings fingerprint and the sha256
of its data file. A rerun sends only rows without a result for the same digest, and reports what a
fresh run of the same command would (`Planner`); different settings are refused (`EvalError`).
run.json records the rows the command selected: its summary describes those only. One run at a
time holds RUN_DIR/run.lock.

A reply gives its slot to the next request at once and is graded beside the requests (`_pipeline`);
until its record is written it is kept in RUN_DIR/replies.jsonl (`_journal`), which the next run
grades without sending the row again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from .._files import Busy, exclusive_lock, file_sha256
from .._openai import (
    ChatError,
    ChatResult,
    ChatStopped,
    chat_completion,
    is_prompt_too_long,
    make_client,
    redact,
)
from .._paths import hub_source
from .._tokens import TokenizerError
from ._config import (
    EvalConfig,
    EvalError,
    EvalFatal,
    settings_differences,
    settings_fingerprint,
    with_stored_prices,
)
from ._control import sent_messages
from ._fit import TooLong, prompt_counter, rows_over_window
from ._items import EvalItem, EvalRecipe, FileError, recipe_named
from ._journal import ReplyJournal, reply_of
from ._pipeline import Backlog, GradePool, Prefetch
from ._planner import FILE_ERROR, GRADE, JOB, Planner, base_record, scored_record
from ._results import (
    LOCK_NAME,
    RESULTS_NAME,
    RUN_NAME,
    STATUS_ERROR,
    STATUS_SKIPPED,
    ResultsWriter,
    read_results,
)

log = logging.getLogger(__name__)


class RunStats(BaseModel):
    sent: int = 0
    scored: int = 0
    errors: int = 0
    skipped: int = 0
    resumed: int = 0
    file_errors: int = 0
    max_in_flight: int = 0

    def count(self, kind: str, record: dict) -> None:
        """Count a record the `Planner` wrote at once (a file error, a skipped row, a row error)."""
        if kind == FILE_ERROR:
            self.file_errors += 1
        elif record.get("status") == STATUS_SKIPPED:
            self.skipped += 1
        elif record.get("status") == STATUS_ERROR:
            self.errors += 1


def _journal_key(record: dict) -> dict:
    """What names a journaled reply's row: its file, row, content and the run's settings."""
    return {name: record[name] for name in ("file", "row", "digest", "settings")}


def resolve_inputs(paths: list[str]) -> list[str]:
    """Absolute paths, each once, in first-seen order (so `f.parquet` and `$PWD/f.parquet` are one file)."""
    seen: dict[str, None] = {}
    for path in paths:
        seen.setdefault(str(Path(path).resolve()), None)
    return list(seen)


def _read_run_file(out: Path) -> dict | None:
    run_file = out / RUN_NAME
    if not run_file.exists():
        return None
    try:
        previous = json.loads(run_file.read_text(encoding="utf-8"))
    except (ValueError, OSError) as exc:
        raise EvalError(f"{run_file} is not valid JSON") from exc
    if not isinstance(previous, dict) or "settings" not in previous:
        raise EvalError(f"{out} holds a run of an older mrcr-eval (no settings fingerprint); choose another --out")
    return previous


def _check_settings(out: Path, previous: dict | None, settings: dict) -> None:
    if previous is None or previous["settings"] == settings:
        return
    differences = settings_differences(previous["settings"], settings)
    raise EvalError(
        f"{out} holds a run with other settings ({'; '.join(differences)}); "
        "rerun with the same settings, or point --out elsewhere for a new run"
    )


def run_record(
    config: EvalConfig, previous: dict | None, shas: dict[str, str], *, finished: bool, selection: dict
) -> dict:
    """RUN_DIR/run.json: settings, fingerprint, data files with sha256 (all this run dir has seen) and
    the `selection` of the last command (its files; its rows and unreadable files once it ended)."""
    data = {entry["path"]: entry["sha256"] for entry in (previous or {}).get("data", []) if isinstance(entry, dict)}
    data.update(shas)
    settings = config.settings()
    return {
        "model": config.model,
        "base_url": settings["base_url"],
        "settings": settings,
        "fingerprint": settings_fingerprint(settings),
        "data": [{"path": path, "sha256": sha} for path, sha in data.items()],
        "max_context_window": config.max_context_window,
        "price_per_1m": config.price_per_1m,
        "options": config.model_dump(
            include={
                "concurrency",
                "needles",
                "bins",
                "limit",
                "max_retries",
                "timeout",
                "retry_errors",
                "tokenizer_spec",
                "chat_template",
                "count_with_server",
                "price_in",  # as given: a resume without them keeps them (`with_stored_prices`)
                "price_out",
                "price_cached",
                "per_bin",
                "per_bin_seed",
            }
        ),
        "finished": finished,
        "selection": selection,
    } | _hub_sources(config)


def _hub_sources(config: EvalConfig) -> dict:
    """The pinned hf:// source of each data file downloaded from the Hub, if any."""
    hub = {str(Path(p).resolve()): source for p in config.data if (source := hub_source(p)) is not None}
    return {"hub_sources": hub} if hub else {}


def _write_run_file(out: Path, record: dict) -> None:
    from .._files import write_text_atomic

    write_text_atomic(out / RUN_NAME, json.dumps(record, indent=2) + "\n")


async def run_eval_async(
    config: EvalConfig,
    *,
    recipes: Sequence[EvalRecipe],
    api_key: str | None = None,
    client: Any = None,
    on_record: Callable[[dict], None] | None = None,
    too_long: Sequence[TooLong] | None = None,
) -> RunStats:
    """Evaluate; returns the counts of this invocation. Writes results.jsonl and run.json only;
    call `write_report` (or use `run_eval`) for summary.json and plot.png.

    Raises EvalError for bad input or changed settings (nothing is sent), EvalFatal when the
    server refused for good (what was in flight is recorded first). `recipes` read the files and
    grade the replies (`mrcr_gen.recipes.RECIPES`; `mrcr_gen.run_eval_async` passes them).
    """
    with locked_run_folder(config) as (files, out):
        return await _run_locked(
            config, files, out, recipes=recipes, api_key=api_key, client=client, on_record=on_record, too_long=too_long
        )


@contextlib.contextmanager
def locked_run_folder(config: EvalConfig) -> Iterator[tuple[list[str], Path]]:
    """(the data files, resolved, each of which must exist; RUN_DIR), RUN_DIR held (run.lock) within;
    EvalError when a file is missing, the folder cannot be written or another run holds it."""
    files = resolve_inputs(config.data)
    for path in files:
        if not Path(path).is_file():
            raise EvalError(f"data file not found: {path}")
    out = Path(config.out)
    with contextlib.ExitStack() as held:
        try:
            out.mkdir(parents=True, exist_ok=True)
            # One writer per run folder, for the whole run: a second run would send the same rows.
            held.enter_context(exclusive_lock(out / LOCK_NAME, f"the run folder {out}"))
        except Busy as exc:
            raise EvalError(str(exc)) from None
        except OSError as exc:
            raise EvalError(f"cannot write the run directory {out}: {exc.strerror or exc}") from None
        yield files, out


async def _run_locked(
    config: EvalConfig,
    files: list[str],
    out: Path,
    *,
    recipes: Sequence[EvalRecipe],
    api_key: str | None,
    client: Any,
    on_record: Callable[[dict], None] | None,
    too_long: Sequence[TooLong] | None,
) -> RunStats:
    previous = _read_run_file(out)
    settings = config.settings()
    _check_settings(out, previous, settings)
    config = with_stored_prices(config, previous)
    shas = {path: await asyncio.to_thread(file_sha256, path) for path in files}
    try:
        _write_run_file(out, run_record(config, previous, shas, finished=False, selection={"files": files}))
    except OSError as exc:
        raise EvalError(f"cannot write the run directory {out}: {exc.strerror or exc}") from None

    results_path = out / RESULTS_NAME
    records = read_results(results_path)
    if client is None:
        try:
            client = make_client(config.base_url, api_key=api_key, timeout=config.timeout)
        except ChatError as exc:
            raise EvalError(str(exc)) from None
    over_window = None
    if config.max_context_window is not None and (too_long is not None or not config.counts_as_seed):
        if too_long is None:  # counted here, still before any request is sent
            too_long = await asyncio.to_thread(preflight, config, api_key, recipes=recipes)
        over_window = {(t.file, t.row): t.prompt_tokens for t in too_long}
    stats = RunStats()
    params = config.request_params()
    base = {"settings": settings_fingerprint(settings)}
    semaphore = asyncio.Semaphore(config.concurrency)
    in_flight = 0
    tasks: set[asyncio.Task] = set()
    grading: set[asyncio.Task] = set()
    grader = GradePool()
    backlog = Backlog()
    journal = ReplyJournal(out, records)
    fatal: list[ChatError] = []
    crashed: list[BaseException] = []  # a task's unexpected exception: observed, stops the run, raised

    def stopping() -> bool:
        return bool(fatal or crashed)

    with ResultsWriter(results_path) as writer:

        def emit(record: dict) -> None:
            writer.write(record)
            if on_record is not None:
                on_record(record)

        def row_record(item: EvalItem) -> tuple[EvalRecipe, dict]:
            """The row's recipe and the fields of its record before the reply: one function for a
            reply graded after its request and one graded from the journal, which must match."""
            recipe = recipe_named(item.recipe, recipes)
            return recipe, base | base_record(item, recipe, shas[item.source], tokenizer=config.tokenizer_spec)

        async def send(item: EvalItem) -> None:
            result = await request(item)
            if result is not None:  # else recorded as an error
                # Waits (keeping the slot) only while the replies waiting for their grade fill the backlog.
                await backlog.reserve(item)
                start_grading(item, *result)

        async def request(item: EvalItem) -> tuple[EvalRecipe, dict, ChatResult] | None:
            """The row's reply (its recipe, its record's row fields, the reply), journaled; None
            when the row got an error record instead."""
            nonlocal in_flight
            recipe, record = row_record(item)
            in_flight += 1
            stats.max_in_flight = max(stats.max_in_flight, in_flight)
            if in_flight == config.concurrency:  # every slot taken: the sender waits for the server
                grader.expect(in_flight, scored_record, recipe)
            try:
                messages = sent_messages(item, recipe, config.control)
                result = await chat_completion(
                    client, config.model, messages, max_retries=config.max_retries, stop=stopping, **params
                )
            except ChatStopped as exc:
                if exc.attempts:  # sent before, then stopped while waiting to retry
                    stats.sent += 1
                    stats.errors += 1
                    emit(
                        record
                        | {"status": STATUS_ERROR, "check": "stopped", "error": str(exc), "attempts": exc.attempts}
                    )
                return None
            except ChatError as exc:
                stats.sent += 1
                stats.errors += 1
                if exc.fatal:
                    fatal.append(exc)
                check = (
                    "fatal"
                    if exc.fatal
                    else "prompt_too_long"
                    if is_prompt_too_long(exc.status, str(exc))
                    else "request"
                )
                emit(
                    record
                    | {
                        "status": STATUS_ERROR,
                        "check": check,
                        "error": str(exc),
                        "http_status": exc.status,
                        "attempts": exc.attempts,
                    }
                )
                return None
            except Exception as exc:  # recorded, never fatal
                stats.sent += 1
                stats.errors += 1
                emit(
                    record
                    | {
                        "status": STATUS_ERROR,
                        "check": "request",
                        "error": redact(f"{type(exc).__name__}: {exc}"),
                        "attempts": 1,
                    }
                )
                return None
            finally:
                in_flight -= 1
            stats.sent += 1
            # Journaled first: the slot goes to the next request now, and a run killed before the
            # grade is written keeps the reply for the next run to grade.
            journal.write(_journal_key(record), result)
            return recipe, record, result

        def start_grading(item: EvalItem, recipe: EvalRecipe, record: dict, result: ChatResult) -> None:
            task = asyncio.create_task(grade(item, recipe, record, result))
            grading.add(task)
            task.add_done_callback(grading_done)

        async def grade(item: EvalItem, recipe: EvalRecipe, record: dict, result: ChatResult) -> None:
            try:
                graded = await grader.grade(scored_record, item, recipe, result, config.strip_think)
                stats.scored += 1
                emit(record | graded)
                journal.recorded(_journal_key(record))
            finally:
                backlog.release(item)

        def grading_done(task: asyncio.Task) -> None:
            grading.discard(task)
            if not task.cancelled() and task.exception() is not None:
                crashed.append(task.exception())  # type: ignore[arg-type]

        async def run_job(items: list[EvalItem]) -> None:
            for item in items:  # one transcript group: in order, so the server's prefix cache hits
                if stopping():
                    return
                await send(item)

        planner = Planner(config, recipes, files, shas, records, base, over_window, journal.pending())
        steps = Prefetch(iter(planner), depth=config.concurrency)  # reads ahead from now on, in its own thread
        finished = False

        def job_done(task: asyncio.Task) -> None:
            tasks.discard(task)
            semaphore.release()
            if not task.cancelled() and task.exception() is not None:
                crashed.append(task.exception())  # type: ignore[arg-type]

        try:
            while not stopping():
                await semaphore.acquire()
                if stopping():
                    semaphore.release()
                    break
                step = await steps.next()
                if step is None:
                    semaphore.release()
                    finished = True
                    break
                kind, payload = step
                if kind == GRADE:
                    semaphore.release()
                    item, entry = payload
                    await backlog.reserve(item)
                    start_grading(item, *row_record(item), reply_of(entry))
                    continue
                if kind != JOB:
                    semaphore.release()
                    stats.count(kind, payload)
                    emit(payload)
                    continue
                task = asyncio.create_task(run_job(payload))
                tasks.add(task)
                task.add_done_callback(job_done)
            # Requests in flight are awaited and recorded, also after a fatal answer or a crashed task:
            # one task's exception must not cancel the replies of the others.
            for running in (tasks, grading):  # the senders first: they start gradings
                if running:
                    for outcome in await asyncio.gather(*running, return_exceptions=True):
                        if isinstance(outcome, Exception) and not any(outcome is seen for seen in crashed):
                            crashed.append(outcome)
        finally:
            # Cancelled tasks must finish before the results file closes under them.
            for running in (tasks, grading):
                for task in running:
                    task.cancel()
                await asyncio.gather(*running, return_exceptions=True)
            grader.close()
            try:
                # Every record on disk first (the last fsync): the journal then lets go of their replies.
                writer.close()
            finally:
                journal.close()
                await steps.close()
                close = getattr(client, "close", None)
                if close is not None:
                    with contextlib.suppress(Exception):
                        await close()
    stats.resumed = planner.resumed
    # The rows this command selected (all of them once finished): what its summary describes.
    finished = finished and not crashed and not fatal
    _write_run_file(out, run_record(config, previous, shas, finished=finished, selection=planner.selection()))
    if crashed:  # never a silent loss: the rows it was writing have no record, so the run is not finished
        raise crashed[0]
    if fatal:
        raise EvalFatal(f"the server refused the run: {fatal[0]} (nothing more was sent)")
    return stats


def preflight(
    config: EvalConfig,
    api_key: str | None = None,
    on_row: Callable[[], None] | None = None,
    *,
    recipes: Sequence[EvalRecipe],
) -> list[TooLong]:
    """The rows whose prompt exceeds `max_context_window` as `config` counts them (its tokenizer,
    chat template or the server's /tokenize), found before any request is sent."""
    if config.max_context_window is None:
        return []
    server = None
    if config.count_with_server:
        if not config.base_url:
            raise EvalError("--count-with-server needs --base-url (the server's /tokenize is asked)")
        server = (config.base_url, config.model)
    try:
        key = api_key or os.environ.get("OPENAI_API_KEY")
        count = prompt_counter(config.tokenizer_spec, chat_template=config.chat_template, server=server, api_key=key)
        files = resolve_inputs(config.data)
        return rows_over_window(
            files, config.max_context_window, count, recipes=recipes, needles=config.needles, on_row=on_row
        )
    except (TokenizerError, FileError) as exc:
        raise EvalError(str(exc)) from None


def run_eval(config: EvalConfig, *, recipes: Sequence[EvalRecipe], api_key: str | None = None) -> tuple[RunStats, dict]:
    """Run (or resume) an evaluation, then write summary.json and plot.png; returns (stats, summary)."""
    from ._report import write_report

    stats = asyncio.run(run_eval_async(config, recipes=recipes, api_key=api_key))
    summary = write_report(config.out, recipes=recipes)
    return stats, summary


__all__ = ["EvalConfig", "EvalError", "EvalFatal", "RunStats", "TooLong", "preflight", "run_eval", "run_eval_async"]
