"""`mrcr-eval`: score any OpenAI-compatible model on MRCR parquet files, resumably.

Each finished row is appended to RUN_DIR/results.jsonl (flushed and fsynced) before the next
result is written, so a killed run resumes without repeating a completed call. Rows whose
prompt has more o200k tokens than `max_context_window` are skipped and counted, as the seed's
loop does (it counts the prompt messages only). Failed calls are recorded as errors; they do
not stop the run, and a resumed run retries them unless `retry_errors` is off.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .._bins import bin_upper
from .._openai import DEFAULT_TIMEOUT, ChatError, chat_completion, make_client, redact
from ._data import DataError, RowInfo, data_key, read_rows, row_info
from ._floors import row_floors
from ._grade import grade, grade_lenient
from ._report import write_report
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


class EvalError(RuntimeError):
    """Bad input for a run (missing file, RUN_DIR of another model, ...)."""


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
    max_retries: int = Field(default=8, ge=0)
    timeout: float = Field(default=DEFAULT_TIMEOUT, gt=0)
    retry_errors: bool = True

    def request_params(self) -> dict[str, Any]:
        params: dict[str, Any] = {}
        if self.temperature is not None:
            params["temperature"] = self.temperature
        if self.max_output_tokens is not None:
            params[self.max_tokens_field] = self.max_output_tokens
        return params


class RunStats(BaseModel):
    sent: int = 0
    scored: int = 0
    errors: int = 0
    skipped: int = 0
    resumed: int = 0
    max_in_flight: int = 0


_SKIP = "skip"
_JOB = "job"


def _plan(config: EvalConfig, final: dict[tuple[str, int], dict]) -> Iterator[tuple[str, Any]]:
    """Walk the data in order, yielding ("job", RowInfo) or ("skip", record) for rows to handle.

    Filters apply in this order: needles, bin, limit (rows already done count toward the
    limit), then the context window. Rows already done are not tokenized again.
    """
    wanted_needles = set(config.needles) if config.needles else None
    wanted_bins = set(config.bins) if config.bins else None
    taken = 0
    for path in config.data:
        key = data_key(path)
        for index, row in _read_any(path, key):
            if config.limit is not None and taken >= config.limit:
                return
            if wanted_needles is not None and row.n_needles not in wanted_needles:
                continue
            previous = final.get((key, index))
            if previous is not None and previous.get("status") == STATUS_OK:
                if wanted_bins is None or bin_upper(previous["bin"]) in wanted_bins:
                    taken += 1
                continue
            if previous is not None and previous.get("status") == STATUS_ERROR and not config.retry_errors:
                if wanted_bins is None or bin_upper(previous["bin"]) in wanted_bins:
                    taken += 1
                continue
            info = row if isinstance(row, RowInfo) else row_info(key, index, row)
            if wanted_bins is not None and bin_upper(info.bin) not in wanted_bins:
                continue
            taken += 1
            if config.max_context_window is not None and info.prompt_tokens > config.max_context_window:
                if not (
                    previous is not None
                    and previous.get("status") == STATUS_SKIPPED
                    and previous.get("max_context_window") == config.max_context_window
                ):
                    yield _SKIP, _base_record(info) | {
                        "status": STATUS_SKIPPED,
                        "reason": "context",
                        "max_context_window": config.max_context_window,
                    }
                continue
            yield _JOB, info


def _read_any(path: str, key: str) -> Iterator[tuple[int, Any]]:
    """(index, MrcrRow) of an openai/mrcr file, or (index, RowInfo) of an MRCR v2 file."""
    from ..v2._rows import is_v2_file

    if not is_v2_file(path):
        yield from read_rows(path)
        return
    from ..v2._eval import row_infos

    yield from row_infos(path, key)


def _base_record(info: RowInfo) -> dict[str, Any]:
    return {
        "file": info.file,
        "row": info.row,
        "bin": info.bin,
        "n_needles": info.n_needles,
        "o200k_prompt_tokens": info.prompt_tokens,
        "o200k_tokens": info.total_tokens,
    }


def _scored_record(info: RowInfo, response: str, result: Any) -> dict[str, Any]:
    if info.recipe == "mrcr-v2":
        from ..v2._eval import scored_fields

        return _base_record(info) | scored_fields(info, response, result)
    floors = row_floors(info.messages, info.answer, info.random_string)
    return _base_record(info) | {
        "status": STATUS_OK,
        "response": response,
        "score": grade(response, info.answer, info.random_string),
        "score_lenient": grade_lenient(response, info.answer, info.random_string),
        "latency_s": result.latency_s,
        "attempts": result.attempts,
        "usage": {"prompt_tokens": result.prompt_tokens, "completion_tokens": result.completion_tokens},
        "finish_reason": result.finish_reason,
        "floor_random_needle": floors.random_needle,
        "floor_random_writing": floors.random_writing,
    }


def _check_run_dir(config: EvalConfig) -> None:
    run_file = Path(config.out) / RUN_NAME
    if run_file.exists():
        try:
            previous = json.loads(run_file.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise EvalError(f"{run_file} is not valid JSON") from exc
        if previous.get("model") != config.model:
            raise EvalError(
                f"{config.out} holds a run of model {previous.get('model')!r}, not {config.model!r}; choose another --out"
            )


def _write_run_file(config: EvalConfig) -> None:
    from .._files import write_text_atomic

    run_file = Path(config.out) / RUN_NAME
    record = config.model_dump()
    record["data"] = [data_key(p) for p in config.data]
    write_text_atomic(run_file, json.dumps(record, indent=2) + "\n")


async def run_eval_async(
    config: EvalConfig,
    *,
    api_key: str | None = None,
    client: Any = None,
    on_record: Callable[[dict], None] | None = None,
) -> RunStats:
    """Evaluate; returns the counts of this invocation. Writes results.jsonl and run.json only;
    call `write_report` (or use `run_eval`) for summary.json and plot.png."""
    for path in config.data:
        if not Path(path).is_file():
            raise EvalError(f"data file not found: {path}")
    _check_run_dir(config)
    out = Path(config.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        _write_run_file(config)
    except OSError as exc:
        raise EvalError(f"cannot write the run directory {out}: {exc.strerror or exc}") from None

    results_path = out / RESULTS_NAME
    final = latest_records(read_results(results_path))
    if client is None:
        try:
            client = make_client(config.base_url, api_key=api_key, timeout=config.timeout)
        except ChatError as exc:
            raise EvalError(str(exc)) from None
    stats = RunStats(resumed=sum(1 for r in final.values() if r.get("status") == STATUS_OK))
    params = config.request_params()
    semaphore = asyncio.Semaphore(config.concurrency)
    in_flight = 0
    tasks: set[asyncio.Task] = set()

    with ResultsWriter(results_path) as writer:

        def emit(record: dict) -> None:
            writer.write(record)
            if on_record is not None:
                on_record(record)

        group_locks: dict[str, asyncio.Lock] = {}

        async def evaluate(info: RowInfo) -> None:
            if info.group is None:
                return await _evaluate(info)
            async with group_locks.setdefault(info.group, asyncio.Lock()):  # the prefix cache hits
                await _evaluate(info)

        async def _evaluate(info: RowInfo) -> None:
            nonlocal in_flight
            in_flight += 1
            stats.max_in_flight = max(stats.max_in_flight, in_flight)
            stats.sent += 1
            try:
                result = await chat_completion(
                    client, config.model, info.messages, max_retries=config.max_retries, **params
                )
            except ChatError as exc:
                stats.errors += 1
                emit(_base_record(info) | {"status": STATUS_ERROR, "error": str(exc), "attempts": exc.attempts})
                return
            except Exception as exc:  # noqa: BLE001 - recorded, never fatal
                stats.errors += 1
                error = redact(f"{type(exc).__name__}: {exc}")
                emit(_base_record(info) | {"status": STATUS_ERROR, "error": error, "attempts": 1})
                return
            finally:
                in_flight -= 1
            record = await asyncio.to_thread(_scored_record, info, result.text, result)
            stats.scored += 1
            emit(record)

        plan = _plan(config, final)
        done = object()
        try:
            while True:
                await semaphore.acquire()
                item = await asyncio.to_thread(next, plan, done)
                if item is done:
                    semaphore.release()
                    break
                kind, payload = item
                if kind == _SKIP:
                    stats.skipped += 1
                    emit(payload)
                    semaphore.release()
                    continue
                task = asyncio.create_task(evaluate(payload))
                tasks.add(task)
                task.add_done_callback(lambda t: (tasks.discard(t), semaphore.release()))
            if tasks:
                await asyncio.gather(*tasks)
        except DataError as exc:
            raise EvalError(str(exc)) from None
        finally:
            # Cancelled tasks must finish before the results file closes under them.
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            close = getattr(client, "close", None)
            if close is not None:
                try:
                    await close()
                except Exception:  # noqa: BLE001
                    pass
    return stats


def run_eval(config: EvalConfig, *, api_key: str | None = None) -> tuple[RunStats, dict]:
    """Run (or resume) an evaluation, then write summary.json and plot.png; returns (stats, summary)."""
    stats = asyncio.run(run_eval_async(config, api_key=api_key))
    summary = write_report(config.out)
    return stats, summary


__all__ = ["EvalConfig", "EvalError", "RunStats", "run_eval", "run_eval_async"]
