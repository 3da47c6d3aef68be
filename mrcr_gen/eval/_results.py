"""RUN_DIR/results.jsonl: one JSON object per finished row, appended and flushed at once, fsynced
by a thread of its own right behind."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

RESULTS_NAME = "results.jsonl"
RUN_NAME = "run.json"
LOCK_NAME = "run.lock"  # held (fcntl.flock) by the run writing the folder
SUMMARY_NAME = "summary.json"
PLOT_NAME = "plot.png"
JOURNAL_NAME = "replies.jsonl"  # replies not yet recorded (`_journal`)
BATCH_DIR = "batches"  # a --batch run's files (`_batch`)
DEPTH_PLOT, ORDINALS_PLOT, OUTCOMES_PLOT = "plot_depth.png", "plot_ordinals.png", "plot_outcomes.png"
REPORT_NAME = "report.html"
#: Everything mrcr-eval and its reports write in a run folder: a folder without our run.json that
#: holds one of them is refused (mrcr-gen never overwrites a file it did not write).
RUN_FOLDER_NAMES = (
    RUN_NAME,
    RESULTS_NAME,
    LOCK_NAME,
    SUMMARY_NAME,
    PLOT_NAME,
    JOURNAL_NAME,
    BATCH_DIR,
    DEPTH_PLOT,
    ORDINALS_PLOT,
    OUTCOMES_PLOT,
    REPORT_NAME,
)

STATUS_OK = "ok"
STATUS_ERROR = "error"
STATUS_SKIPPED = "skipped"


class ResultsWriter:
    """Append-only writer: each record is one line, written and flushed before `write` returns (so
    it outlives the process). With `sync` (the default), a thread of its own also fsyncs the file
    behind the writes, one fsync for every line written since the last, and `close` waits for the
    last one: an fsync takes milliseconds, which the event loop that calls `write` once per row must
    not wait for (600 rows of a short run stalled it for about a second). An fsync error is raised
    by the next `write` or by `close`.

    A run killed mid-write leaves at most one torn last line; it is ignored on reading and
    the next writer starts on a fresh line.
    """

    def __init__(self, path: str | os.PathLike, *, sync: bool = True):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        needs_newline = self.path.exists() and self.path.stat().st_size > 0 and not _ends_with_newline(self.path)
        self._handle = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self._syncer = _Syncer(self._handle.fileno()) if sync else None
        if needs_newline:
            self._handle.write("\n")
            self._flush()

    def _flush(self) -> None:
        self._handle.flush()
        if self._syncer is not None:
            self._syncer.request()

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False)
        try:
            line.encode("utf-8")
        except UnicodeEncodeError:
            # A reply may hold a lone surrogate (valid JSON, "\ud83d"), which UTF-8 cannot store:
            # the record is stored with ASCII escapes instead, which read back as the same text.
            line = json.dumps(record)
        self._handle.write(line + "\n")
        self._flush()

    def close(self) -> None:
        """Flush, wait for the last fsync (raising its error, if any), close."""
        if self._handle.closed:
            return
        try:
            self._handle.flush()
            if self._syncer is not None:
                self._syncer.close()
        finally:
            self._handle.close()

    def __enter__(self) -> ResultsWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Syncer:
    """fsyncs one file descriptor in a thread whenever `request` was called since its last fsync."""

    def __init__(self, fd: int):
        self._fd = fd
        self._wanted = threading.Event()
        self._closing = False
        self._error: OSError | None = None
        self._thread = threading.Thread(target=self._run, name="results fsync", daemon=True)
        self._thread.start()

    def request(self) -> None:
        if self._error is not None:
            raise self._error
        self._wanted.set()

    def _run(self) -> None:
        while True:
            self._wanted.wait()
            self._wanted.clear()
            closing = self._closing  # read before the fsync: it then covers every write before close
            try:
                os.fsync(self._fd)
            except OSError as exc:
                self._error = exc
                return
            if closing:
                return

    def close(self) -> None:
        """Wait for an fsync that covers every write made before this call."""
        self._closing = True
        self._wanted.set()
        self._thread.join()
        if self._error is not None:
            raise self._error


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as handle:
        handle.seek(-1, os.SEEK_END)
        return handle.read(1) == b"\n"


def read_results(path: str | os.PathLike) -> list[dict[str, Any]]:
    """Every well-formed record, in file order (a torn or corrupt line, or a record of another
    shape, is skipped)."""
    return [record for record in json_lines(path) if _well_formed(record)]


def json_lines(path: str | os.PathLike) -> Iterator[Any]:
    """The JSON value of each line of a file `ResultsWriter` appended to, in file order; blank,
    torn and corrupt lines are skipped, and a missing file has none."""
    path = Path(path)
    if not path.exists():
        return
    # A write torn inside a multi-byte character must not make the whole file unreadable.
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            line = line.strip()
            if not line:
                continue
            try:
                yield json.loads(line)
            except ValueError:
                continue


def _well_formed(record: Any) -> bool:
    """A record of this version's shape: a row's (file, row, status, bin, needles) or a file's (row null)."""
    if not isinstance(record, dict) or not isinstance(record.get("file"), str):
        return False
    row = record.get("row", False)
    if row is None:
        return True
    return (
        isinstance(row, int)
        and not isinstance(row, bool)
        and isinstance(record.get("status"), str)
        and isinstance(record.get("bin"), str)
        and isinstance(record.get("n_needles"), int)
    )


def latest_records(records: list[dict[str, Any]]) -> dict[tuple[str, int], dict[str, Any]]:
    """One record per (file, row), the latest (a rerun's result supersedes the one before);
    file-level records (row null) are left out."""
    final: dict[tuple[str, int], dict[str, Any]] = {}
    for record in records:
        if isinstance(record["row"], int):
            final[(record["file"], record["row"])] = record
    return final


def latest_file_errors(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The latest file-level error of each file (row null)."""
    return {record["file"]: record for record in records if record["row"] is None}


def latest_answers(records: list[dict[str, Any]]) -> dict[tuple[str, int], dict[str, Any]]:
    """The latest reply (status ok) or failed send (status error) of each (file, row): kept for reuse
    even after a later skip record (a narrower window) superseded it in `latest_records`."""
    answers: dict[tuple[str, int], dict[str, Any]] = {}
    for record in records:
        if isinstance(record["row"], int) and record.get("status") in (STATUS_OK, STATUS_ERROR):
            answers[(record["file"], record["row"])] = record
    return answers


def row_ranges(rows: list[int]) -> list[list[int]]:
    """Sorted row indices as inclusive [first, last] runs (the compact form run.json stores)."""
    ranges: list[list[int]] = []
    for row in sorted(set(rows)):
        if ranges and ranges[-1][1] == row - 1:
            ranges[-1][1] = row
        else:
            ranges.append([row, row])
    return ranges


def selected_keys(selection: dict[str, Any]) -> set[tuple[str, int]] | None:
    """The (file, row) pairs a command selected (run.json's `selection.rows`); None when not recorded
    (a run killed before it ended: then every row of its files)."""
    rows = selection.get("rows")
    if not isinstance(rows, dict):
        return None
    return {(path, row) for path, ranges in rows.items() for first, last in ranges for row in range(first, last + 1)}
