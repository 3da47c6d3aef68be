"""`mrcr-eval`: score any OpenAI-compatible model on MRCR files, resumably, the official way.

Scoring policy (the official loop's): every row that got an HTTP 200 is graded, whatever its
content; empty or `null` content scores 0 and is not retried. Only transport failures (429,
5xx, timeouts, connection errors, a body that is not a chat completion) are retried. A row whose
retries run out is an error: it counts as 0 in `mean_score`, marks the run incomplete, and a
rerun sends it again. 401/403/404 or an unknown model stop the run: requests in flight are
awaited and recorded, nothing more is sent (`EvalFatal`).

Each finished row is appended to RUN_DIR/results.jsonl (flushed and fsynced) with the digest
of its content, the settings fingerprint and the sha256 of its data file. A rerun sends only
rows without a result for the same digest; different settings are refused (`EvalError`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .._files import file_sha256
from .._openai import (
    DEFAULT_TIMEOUT,
    ChatError,
    ChatStopped,
    chat_completion,
    is_prompt_too_long,
    make_client,
    redact,
)
from .._paths import hub_source
from .._tokens import TokenizerError
from ._fit import TooLong, prompt_counter, rows_over_window
from ._items import EvalItem, FileError, grade_item, grade_item_lenient, item_extras, read_items
from ._results import (
    RESULTS_NAME,
    RUN_NAME,
    STATUS_ERROR,
    STATUS_OK,
    STATUS_SKIPPED,
    ResultsWriter,
    latest_records,
    read_results,
)

log = logging.getLogger(__name__)

OPENAI_BASE_URL = "https://api.openai.com/v1"
THINK_TAG = "<think>"
_THINK_BLOCK = re.compile(r"<think>.*?</think>\s*", re.DOTALL)


class EvalError(RuntimeError):
    """Bad input for a run (missing file, changed settings, ...): exit code 2."""


class EvalFatal(EvalError):
    """The server refused in a way no retry can fix (bad key, unknown model, wrong URL)."""


class EvalConfig(BaseModel):
    """Everything that defines a run. Never holds the API key."""

    model_config = ConfigDict(extra="forbid")

    data: list[str] = Field(min_length=1)
    model: str
    out: str
    base_url: str | None = None
    concurrency: int = Field(default=8, ge=1)
    max_context_window: int | None = Field(default=None, ge=1)
    needles: list[int] | None = None
    bins: list[int] | None = Field(default=None, description="upper edges of the bins to keep")
    limit: int | None = Field(default=None, ge=0)
    temperature: float | None = None
    max_output_tokens: int | None = Field(default=None, ge=1)
    max_tokens_field: Literal["max_completion_tokens", "max_tokens"] = "max_completion_tokens"
    reasoning_effort: str | None = None
    extra_body: dict[str, Any] | None = Field(default=None, description="merged into every request body")
    strip_think: bool = Field(default=False, description="grade replies without <think> blocks (NOT official)")
    max_retries: int = Field(default=8, ge=0)
    timeout: float = Field(default=DEFAULT_TIMEOUT, gt=0)
    retry_errors: bool = True
    price_in: float | None = Field(default=None, ge=0, description="USD per 1M prompt tokens")
    price_out: float | None = Field(default=None, ge=0, description="USD per 1M completion tokens")
    tokenizer_spec: str = "o200k_base"
    # How --max-context-window counts a prompt (see _fit): contents with `tokenizer_spec`, the
    # chat template rendered with it, or the server's /tokenize.
    chat_template: bool = False
    count_with_server: bool = False

    @property
    def counts_as_seed(self) -> bool:
        """Whether prompts are counted as the seed counts them (o200k over the contents)."""
        return self.tokenizer_spec == "o200k_base" and not self.chat_template and not self.count_with_server

    def request_params(self) -> dict[str, Any]:
        """Keyword arguments of every `chat.completions.create` call besides model and messages."""
        params: dict[str, Any] = {}
        if self.temperature is not None:
            params["temperature"] = self.temperature
        if self.max_output_tokens is not None:
            params[self.max_tokens_field] = self.max_output_tokens
        if self.reasoning_effort is not None:
            params["reasoning_effort"] = self.reasoning_effort
        if self.extra_body:
            params["extra_body"] = dict(self.extra_body)
        return params

    def settings(self) -> dict[str, Any]:
        """What decides the replies and their scores: a rerun must use the same."""
        return {
            "model": self.model,
            "base_url": (self.base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_BASE_URL).rstrip("/"),
            "request": self.request_params(),
            "strip_think": self.strip_think,
        }


def settings_fingerprint(settings: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode("utf-8")).hexdigest()


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        flat: dict[str, Any] = {}
        for key, inner in value.items():
            flat.update(_flatten(inner, f"{prefix}{key}."))
        return flat
    return {prefix.rstrip("."): value}


def settings_differences(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """`name: old -> new` for every setting that differs (nested ones dotted, e.g. request.temperature)."""
    old, new = _flatten(before), _flatten(after)
    missing = object()
    lines = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key, missing), new.get(key, missing)
        if a != b:
            show = lambda v: "(not set)" if v is missing else json.dumps(v)  # noqa: E731
            lines.append(f"{key}: {show(a)} -> {show(b)}")
    return lines


class RunStats(BaseModel):
    sent: int = 0
    scored: int = 0
    errors: int = 0
    skipped: int = 0
    resumed: int = 0
    file_errors: int = 0
    max_in_flight: int = 0


def resolve_inputs(paths: list[str]) -> list[str]:
    """Absolute paths, each once, in first-seen order (so `f.parquet` and `$PWD/f.parquet` are one file)."""
    seen: dict[str, None] = {}
    for path in paths:
        seen.setdefault(str(Path(path).resolve()), None)
    return list(seen)


def graded_text(response: str, strip_think: bool) -> str:
    """The text the grader sees: the reply itself, or (--strip-think, not official) without <think> blocks."""
    return _THINK_BLOCK.sub("", response) if strip_think else response


_JOB = "job"
_RECORD = "record"
_FILE_ERROR = "file_error"


class _Planner:
    """Walks the data in order and says what to do with each row: send it (a job: the items of
    one transcript group), or write a record at once (skipped, unreadable, carried over).

    Filters apply in this order: needles, bin, limit (rows already done count toward the limit),
    then the context window. Rows already done are neither parsed nor tokenized again.
    """

    def __init__(
        self,
        config: EvalConfig,
        files: list[str],
        shas: dict[str, str],
        final: dict,
        base: dict,
        too_long: dict[tuple[str, int], int] | None = None,
    ):
        self.config = config
        self.too_long = too_long  # (source, row) -> prompt tokens, when a pre-flight counted them
        self.files = files
        self.shas = shas
        self.final = final
        self.base = base  # digest-independent fields of every record (settings fingerprint)
        self.taken = 0
        self.resumed = 0

    def _done(self, key: tuple[str, int], digest: str) -> dict | None:
        previous = self.final.get(key)
        if previous is None or previous.get("digest") != digest or previous.get("settings") != self.base["settings"]:
            return None
        status = previous.get("status")
        if status == STATUS_OK:
            return previous
        if status == STATUS_ERROR and not self.config.retry_errors:
            return previous
        if status == STATUS_SKIPPED and previous.get("max_context_window") == self.config.max_context_window:
            return previous
        return None

    def _over_window(self, item: EvalItem, window: int) -> bool:
        if self.too_long is not None:
            return (item.source, item.row) in self.too_long
        return item.prompt_tokens > window

    def _wanted(self, n_needles: int, bin_upper: int) -> bool:
        config = self.config
        if config.needles and n_needles not in config.needles:
            return False
        return not (config.bins and bin_upper not in config.bins)

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        config = self.config
        for path in self.files:
            if config.limit is not None and self.taken >= config.limit:
                return
            sha = self.shas[path]
            group: list[EvalItem] = []
            done_now: dict[int, dict] = {}

            def skip(row: int, digest: str, path: str = path, done_now: dict[int, dict] = done_now) -> bool:
                previous = self._done((path, row), digest)
                if previous is not None:
                    done_now[row] = previous
                return previous is not None

            try:
                for item in read_items(path, tokenizer_spec=config.tokenizer_spec, skip=skip):
                    if config.limit is not None and self.taken >= config.limit:
                        break
                    previous = done_now.pop(item.row, None)
                    if previous is not None:
                        if previous.get("data_sha256") != sha:  # same row in a rewritten file: still valid
                            yield _RECORD, previous | {"data_sha256": sha}
                        if self._wanted(int(previous.get("n_needles") or 0), int(previous.get("bin_upper") or 0)):
                            self.taken += 1
                            self.resumed += previous.get("status") == STATUS_OK
                        continue
                    if item.error is None and not self._wanted(item.n_needles, item.bin_upper):
                        continue
                    self.taken += 1
                    record = self.base | base_record(item, sha)
                    if item.error is not None:
                        yield (
                            _RECORD,
                            record
                            | {
                                "status": STATUS_ERROR,
                                "check": item.error.check,
                                "error": item.error.message,
                                "attempts": 0,
                            },
                        )
                    elif config.max_context_window is not None and self._over_window(item, config.max_context_window):
                        yield (
                            _RECORD,
                            record
                            | {
                                "status": STATUS_SKIPPED,
                                "reason": "context",
                                "max_context_window": config.max_context_window,
                            }
                            | (
                                {}
                                if self.too_long is None
                                else {"context_tokens": self.too_long[(item.source, item.row)]}
                            ),
                        )
                    elif group and item.group is not None and item.group == group[-1].group:
                        group.append(item)
                    else:
                        if group:
                            yield _JOB, group
                        group = [item]
                if group:
                    yield _JOB, group
            except FileError as exc:
                if group:
                    yield _JOB, group
                yield (
                    _FILE_ERROR,
                    {
                        "file": path,
                        "row": None,
                        "status": STATUS_ERROR,
                        "check": "file",
                        "error": str(exc),
                        "data_sha256": sha,
                    }
                    | self.base,
                )


def base_record(item: EvalItem, data_sha256: str) -> dict[str, Any]:
    return {
        "file": item.source,
        "row": item.row,
        "digest": item.digest,
        "data_sha256": data_sha256,
        "recipe": item.recipe,
        "bin": item.bin,
        "bin_upper": item.bin_upper,
        "n_needles": item.n_needles,
        "o200k_prompt_tokens": item.prompt_tokens,
        "o200k_tokens": item.total_tokens,
    }


def scored_record(item: EvalItem, result: Any, strip_think: bool) -> dict[str, Any]:
    """The fields of a graded row (the reply, its scores, usage, finish_reason, extras)."""
    text = graded_text(result.text, strip_think)
    return {
        "status": STATUS_OK,
        "response": result.text,
        "score": grade_item(text, item),
        "score_lenient": grade_item_lenient(text, item),
        "content_null": result.content_null,
        "think": THINK_TAG in result.text,
        "reasoning_chars": result.reasoning_chars,
        "finish_reason": result.finish_reason,
        "latency_s": result.latency_s,
        "attempts": result.attempts,
        "usage": {
            "prompt_tokens": result.prompt_tokens,
            "completion_tokens": result.completion_tokens,
            "reasoning_tokens": result.reasoning_tokens,
            "cached_tokens": result.cached_tokens,
        },
    } | item_extras(item)


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


def run_record(config: EvalConfig, previous: dict | None, shas: dict[str, str], *, finished: bool) -> dict:
    """RUN_DIR/run.json: settings, fingerprint, data files with sha256 (all this run dir has seen)."""
    from .._prices import price_for

    data = {entry["path"]: entry["sha256"] for entry in (previous or {}).get("data", []) if isinstance(entry, dict)}
    data.update(shas)
    settings = config.settings()
    price = price_for(config.model, config.price_in, config.price_out)
    return {
        "model": config.model,
        "base_url": settings["base_url"],
        "settings": settings,
        "fingerprint": settings_fingerprint(settings),
        "data": [{"path": path, "sha256": sha} for path, sha in data.items()],
        "max_context_window": config.max_context_window,
        "price_per_1m": None if price is None else {"input": price[0], "output": price[1]},
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
            }
        ),
        "finished": finished,
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
    api_key: str | None = None,
    client: Any = None,
    on_record: Callable[[dict], None] | None = None,
    too_long: Sequence[TooLong] | None = None,
) -> RunStats:
    """Evaluate; returns the counts of this invocation. Writes results.jsonl and run.json only;
    call `write_report` (or use `run_eval`) for summary.json and plot.png.

    Raises EvalError for bad input or changed settings (nothing is sent), EvalFatal when the
    server refused for good (what was in flight is recorded first).
    """
    files = resolve_inputs(config.data)
    for path in files:
        if not Path(path).is_file():
            raise EvalError(f"data file not found: {path}")
    out = Path(config.out)
    previous = _read_run_file(out)
    settings = config.settings()
    _check_settings(out, previous, settings)
    shas = {path: await asyncio.to_thread(file_sha256, path) for path in files}
    try:
        out.mkdir(parents=True, exist_ok=True)
        _write_run_file(out, run_record(config, previous, shas, finished=False))
    except OSError as exc:
        raise EvalError(f"cannot write the run directory {out}: {exc.strerror or exc}") from None

    results_path = out / RESULTS_NAME
    final = latest_records(read_results(results_path))
    if client is None:
        try:
            client = make_client(config.base_url, api_key=api_key, timeout=config.timeout)
        except ChatError as exc:
            raise EvalError(str(exc)) from None
    over_window = None
    if config.max_context_window is not None and (too_long is not None or not config.counts_as_seed):
        if too_long is None:  # counted here, still before any request is sent
            too_long = await asyncio.to_thread(preflight, config, api_key)
        over_window = {(t.file, t.row): t.prompt_tokens for t in too_long}
    stats = RunStats()
    params = config.request_params()
    base = {"settings": settings_fingerprint(settings)}
    semaphore = asyncio.Semaphore(config.concurrency)
    in_flight = 0
    tasks: set[asyncio.Task] = set()
    fatal: list[ChatError] = []

    def stopping() -> bool:
        return bool(fatal)

    with ResultsWriter(results_path) as writer:

        def emit(record: dict) -> None:
            writer.write(record)
            if on_record is not None:
                on_record(record)

        async def send(item: EvalItem, sha: str) -> None:
            nonlocal in_flight
            record = base | base_record(item, sha)
            in_flight += 1
            stats.max_in_flight = max(stats.max_in_flight, in_flight)
            try:
                result = await chat_completion(
                    client, config.model, item.messages, max_retries=config.max_retries, stop=stopping, **params
                )
            except ChatStopped as exc:
                if exc.attempts:  # sent before, then stopped while waiting to retry
                    stats.sent += 1
                    stats.errors += 1
                    emit(
                        record
                        | {"status": STATUS_ERROR, "check": "stopped", "error": str(exc), "attempts": exc.attempts}
                    )
                return
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
                return
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
                return
            finally:
                in_flight -= 1
            stats.sent += 1
            graded = await asyncio.to_thread(scored_record, item, result, config.strip_think)
            stats.scored += 1
            emit(record | graded)

        async def run_job(items: list[EvalItem], sha: str) -> None:
            for item in items:  # one transcript group: in order, so the server's prefix cache hits
                if stopping():
                    return
                await send(item, sha)

        planner = _Planner(config, files, shas, final, base, over_window)
        plan = iter(planner)
        finished = False

        def job_done(task: asyncio.Task) -> None:
            tasks.discard(task)
            semaphore.release()

        try:
            while not stopping():
                await semaphore.acquire()
                if stopping():
                    semaphore.release()
                    break
                step = await asyncio.to_thread(next, plan, None)
                if step is None:
                    semaphore.release()
                    finished = True
                    break
                kind, payload = step
                if kind != _JOB:
                    semaphore.release()
                    if kind == _FILE_ERROR:
                        stats.file_errors += 1
                    elif payload.get("status") == STATUS_SKIPPED:
                        stats.skipped += 1
                    elif payload.get("status") == STATUS_ERROR:
                        stats.errors += 1
                    emit(payload)
                    continue
                task = asyncio.create_task(run_job(payload, shas[payload[0].source]))
                tasks.add(task)
                task.add_done_callback(job_done)
            # Requests in flight are awaited and recorded, also after a fatal answer.
            if tasks:
                await asyncio.gather(*tasks)
        finally:
            # Cancelled tasks must finish before the results file closes under them.
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            close = getattr(client, "close", None)
            if close is not None:
                with contextlib.suppress(Exception):
                    await close()
    stats.resumed = planner.resumed
    if fatal:
        raise EvalFatal(f"the server refused the run: {fatal[0]} (nothing more was sent)")
    if finished:
        _write_run_file(out, run_record(config, previous, shas, finished=True))
    return stats


def preflight(
    config: EvalConfig, api_key: str | None = None, on_row: Callable[[], None] | None = None
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
        return rows_over_window(files, config.max_context_window, count, needles=config.needles, on_row=on_row)
    except (TokenizerError, FileError) as exc:
        raise EvalError(str(exc)) from None


def run_eval(config: EvalConfig, *, api_key: str | None = None) -> tuple[RunStats, dict]:
    """Run (or resume) an evaluation, then write summary.json and plot.png; returns (stats, summary)."""
    from ._report import write_report

    stats = asyncio.run(run_eval_async(config, api_key=api_key))
    summary = write_report(config.out)
    return stats, summary


__all__ = ["EvalConfig", "EvalError", "EvalFatal", "RunStats", "TooLong", "preflight", "run_eval", "run_eval_async"]
