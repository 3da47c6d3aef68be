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

from .._files import Busy, ForeignFile, exclusive_lock, file_sha256, is_lock_file
from .._openai import ChatError, make_client
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
from ._fit import TooLong, prompt_counter, rows_over_window
from ._items import EvalRecipe, FileError
from ._journal import ReplyJournal
from ._planner import Planner
from ._results import LOCK_NAME, RESULTS_NAME, RUN_FOLDER_NAMES, RUN_NAME, ResultsWriter, read_results
from ._session import RunStats, Session

log = logging.getLogger(__name__)


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
    refuse_foreign_run_files(out)
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


def refuse_foreign_run_files(out: Path) -> None:
    """EvalError naming the first file mrcr-eval would write in `out` that is already there while
    `out` holds no run.json of ours: we never overwrite a file we did not write. A lock file that
    a run killed before its run.json left is ours."""
    if (out / RUN_NAME).is_file():
        return  # a run folder: `_read_run_file` refuses a run.json that is not ours
    for name in RUN_FOLDER_NAMES:
        path = out / name
        if (path.exists() or path.is_symlink()) and not (name == LOCK_NAME and is_lock_file(path)):
            raise EvalError(str(ForeignFile(path, "it is not a run folder of mrcr-eval; choose another --out")))


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
    _start_run_file(out, config, previous, shas, files)
    records = read_results(out / RESULTS_NAME)
    client = client if client is not None else eval_client(config, api_key)
    over_window = await _over_window(config, api_key, too_long, recipes)
    base = {"settings": settings_fingerprint(settings)}
    journal = ReplyJournal(out, records)
    with ResultsWriter(out / RESULTS_NAME) as writer:
        planner = Planner(config, recipes, files, shas, records, base, over_window, journal.pending())
        session = Session(
            config, recipes, shas=shas, base=base, client=client, writer=writer, journal=journal, on_record=on_record
        )
        finished = await session.run(planner)
    session.stats.resumed = planner.resumed
    # The rows this command selected (all of them once finished): what its summary describes.
    _write_run_file(out, run_record(config, previous, shas, finished=finished, selection=planner.selection()))
    if session.crashed:  # never a silent loss: the rows it was writing have no record, so the run is not finished
        raise session.crashed[0]
    if session.fatal:
        raise EvalFatal(f"the server refused the run: {session.fatal[0]} (nothing more was sent)")
    return session.stats


def _start_run_file(
    out: Path, config: EvalConfig, previous: dict | None, shas: dict[str, str], files: list[str]
) -> None:
    """run.json as the run starts: not finished, its selection the files (rows come at the end)."""
    try:
        _write_run_file(out, run_record(config, previous, shas, finished=False, selection={"files": files}))
    except OSError as exc:
        raise EvalError(f"cannot write the run directory {out}: {exc.strerror or exc}") from None


def eval_client(config: EvalConfig, api_key: str | None) -> Any:
    """The OpenAI-compatible client of `config`; EvalError when it cannot be made (no key)."""
    try:
        return make_client(config.base_url, api_key=api_key, timeout=config.timeout)
    except ChatError as exc:
        raise EvalError(str(exc)) from None


async def _over_window(
    config: EvalConfig, api_key: str | None, too_long: Sequence[TooLong] | None, recipes: Sequence[EvalRecipe]
) -> dict[tuple[str, int], int] | None:
    """(file, row) -> prompt tokens of the rows over --max-context-window, when a pre-flight counts
    them (given, or counted here before any request is sent); None when the planner decides."""
    if config.max_context_window is None or (too_long is None and config.counts_as_seed):
        return None
    if too_long is None:
        too_long = await asyncio.to_thread(preflight, config, api_key, recipes=recipes)
    return {(t.file, t.row): t.prompt_tokens for t in too_long}


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
