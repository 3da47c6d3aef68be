"""MRCR v2 files through the recipe-neutral validation pipeline, declared once (`SPEC`): CSV (the
upstream layout) or parquet, read row by row; each file checked whole by one checker, which keeps
what its rows share (the transcript being read, the hashes seen so far: `V2FileState`)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from ..._bins import Bin
from ..._card import sidecar_path
from ...validate import CheckContext, CheckSpec, FileScan, Finding, RepairResult, RowResult, repair, validate_paths
from ._checks import V2FileState, check_v2_record
from ._counted import KnownCounts
from ._generate import tokens_range
from ._probes import PROBES
from ._rows import V2_COLUMNS, V2FileWriter, coerce_record, iter_records

ProgressCallback = Callable[[str, int, int | None], None]  # (file, rows done, total rows if known)

#: Every check name MRCR v2's validation emits, in report order (the order its reports always had:
#: the names it shares with openai/mrcr in that recipe's order, then its own by name).
CHECKS: tuple[str, ...] = (
    "file",
    "schema",
    "duplicate_row",
    "duplicate_prompt",
    "text_encoding",
    "final_query",
    "needle_count",
    "near_duplicate_ask",
    "needle_ask_elsewhere",
    "ground_truth",
    "empty_writing",
    "duplicate_needle_response",
    "ambiguous_needle_response",
    "token_bin",
    "answer_token_count",
    "context_len",
    "hash",
    "hash_key",
    "positions",
    "transcript",
    "v2_row",
    "view_ops",
)
#: Rows read together: v2 rows hold up to ~35 MB of `queries` each, so a batch is a few rows.
BATCH_CHARS = 8 << 20


class Records(list):
    """Consecutive raw records of a v2 file (a batch of the pipeline)."""

    @property
    def num_rows(self) -> int:
        return len(self)

    def to_pylist(self) -> list[dict[str, Any]]:
        return list(self)


class _Output:
    """A v2 output file (`--clean`): CSV or parquet, the rows coerced to their typed cells."""

    def __init__(self, writer: V2FileWriter) -> None:
        self.writer = writer

    def write_batch(self, batch: Records) -> None:
        self.write_records(batch.to_pylist())

    def write_records(self, records: list[dict[str, Any]]) -> None:
        for record in records:
            self.writer.write(coerce_record(record))


def _schema_findings(file: str, columns: list[str]) -> list[Finding]:
    findings = [
        Finding(file=file, row=None, check="schema", severity="error", message=f"column {name!r} is missing")
        for name in V2_COLUMNS
        if name not in columns
    ]
    findings += [
        Finding(file=file, row=None, check="schema", severity="warning", message=f"extra column {name!r}")
        for name in columns
        if name not in V2_COLUMNS
    ]
    return findings


class V2Files:
    """How the pipeline opens, reads and writes MRCR v2 files (CSV or parquet)."""

    def open(self, path: Path, file: str) -> FileScan:
        """The header's findings, reported before the rows; no row is read when a column is missing."""
        from ..._paths import file_columns

        scan = FileScan(file=file)
        columns = file_columns(path)
        if columns is None:
            message = "cannot read as CSV or parquet"
            scan.early_findings.append(Finding(file=file, row=None, check="file", severity="error", message=message))
            return scan
        scan.early_findings += _schema_findings(file, columns)
        scan.readable = not any(f.is_error for f in scan.early_findings)
        if path.suffix.lower() != ".csv":
            with pq.ParquetFile(path) as parquet:
                scan.num_rows = parquet.metadata.num_rows
        return scan

    def read(
        self, path: Path, first: int = 0, count: int | None = None, columns: list[str] | None = None
    ) -> Iterator[Records]:
        """The whole file (a v2 file is checked whole), a few rows at a time; the rows read before
        a failure come first, then the failure."""
        batch, chars = Records(), 0
        try:
            for record in iter_records(path, errors="surrogateescape"):
                batch.append(record)
                chars += len(record.get("queries") or "")
                if chars >= BATCH_CHARS:
                    yield batch
                    batch, chars = Records(), 0
        except Exception:
            if batch:
                yield batch
            raise
        if batch:
            yield batch

    @contextmanager
    def writer(self, target: Path, scan: FileScan) -> Iterator[_Output]:
        """CSV or parquet by the output's suffix, else the input's."""
        suffix = target.suffix.lower() if target.suffix.lower() in (".csv", ".parquet") else Path(scan.file).suffix
        with V2FileWriter(target, "csv" if suffix.lower() == ".csv" else "parquet") as writer:
            yield _Output(writer)


class V2Checker:
    """The rows of one v2 file, in order (what they share lives in its `V2FileState`)."""

    def __init__(self, context: CheckContext) -> None:
        self.state = V2FileState(
            file=context.file,
            count=context.count_tokens,
            threads=context.threads,
            tokenizer=context.tokenizer,
            compare_counts=_comparable(context),
            known=None if context.counts is None else KnownCounts(context.counts),
        )
        # The bucket the file's name promises, unless a sidecar records each row's (checked by the core).
        self.named = None if sidecar_path(Path(context.file)).is_file() else named_range(context.file)

    def check(self, record: dict[str, Any], row: int) -> RowResult:
        result = check_v2_record(record, self.state, row)
        if self.named is None or result.n_tokens is None or result.n_tokens in self.named[1]:
            return result
        message = f"the file name says {self.named[0]}, but the row has {result.n_tokens} tokens ({result.bin})"
        finding = Finding(file=self.state.file, row=row, check="token_bin", severity="error", message=message)
        return result.model_copy(update={"findings": (*result.findings, finding)})

    def finish(self) -> list[Finding]:
        return []


_NAMED = re.compile(
    r"mrcr_v2_\d+needle_(?:in_\((?P<lower>\d+),(?P<upper>\d+)\)|tokens_(?P<tokens>\d+))\.(?:csv|parquet)$"
)


def named_range(file: str) -> tuple[str, Bin] | None:
    """The bucket (or `--tokens` range) a v2 file's name promises its rows, as `mrcr-gen` names
    files (`mrcr_v2_4needle_in_(8192,16384).csv`, `mrcr_v2_2needle_tokens_20000.csv`); None for
    other names. Checked even when no sidecar records the rows' bins."""
    match = _NAMED.search(Path(file).name)
    if match is None:
        return None
    if match["tokens"] is not None:
        return f"--tokens {match['tokens']}", tokens_range(int(match["tokens"]))
    lower, upper = int(match["lower"]), int(match["upper"])
    return f"bucket ({lower}, {upper}]", Bin(lower=lower, upper=upper)


def _comparable(context: CheckContext) -> bool:
    """Whether the file's counts are the recount's tokenizer's (else only the buckets are checked)."""
    return context.recorded_tokenizer is None or context.tokenizer == context.recorded_tokenizer


def _opening(context: CheckContext) -> list[Finding]:
    if _comparable(context):
        return []
    message = (
        f"the file's counts are {context.recorded_tokenizer} tokens; recounted with {context.tokenizer}, "
        "only the buckets are checked"
    )
    return [Finding(file=context.file, row=None, check="context_len", severity="warning", message=message)]


#: What the pipeline needs of MRCR v2 files.
SPEC = CheckSpec(
    reader=V2Files(),
    checker=V2Checker,
    check_names=CHECKS,
    counted="queries recounts",
    whole_files=True,
    opening=_opening,
    probes=PROBES,
    prompt_column="queries",
)


def validate_v2_paths(
    files: Sequence[str | os.PathLike],
    *,
    tokens: bool = True,
    threads: int = 1,
    strict: bool = False,
    progress: ProgressCallback | None = None,
    clean: str | os.PathLike | None = None,
    on_change: Callable[[str], None] | None = None,
    tokenizer: str | None = None,
) -> RepairResult:
    """Validate v2 files through the pipeline (`threads` count a file's tokens). With `clean`, the
    rows that pass go to one output per input, as `mrcr-validate --clean` writes them (`clean` is
    the file for a single input, else a folder; CSV or parquet by the output's suffix, else the
    input's). `tokenizer` recounts (default: the one each file's card names, else o200k_base)."""
    options: dict[str, Any] = {"tokens": tokens, "workers": threads, "progress": progress, "tokenizer": tokenizer}
    if clean is None:
        return RepairResult(report=validate_paths(files, spec=SPEC, strict=strict, **options), output="")
    return repair(files, clean, spec=SPEC, strict=strict, on_change=on_change, **options)
