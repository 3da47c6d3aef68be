"""`--clean` / `--fix`: write the good rows (and, with fix, the recoverable ones) to a new file,
atomically and with the input schema. The input is never modified."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field

from .._files import atomic_path
from .._models import RANDOM_STRING_PATTERN, ordinal
from ._checks import analyze_row, check_row
from ._files import ProgressCallback, expand_paths, iter_validate
from ._findings import ReportBuilder, ValidationReport

#: Checks whose errors `--fix` can repair from the prompt alone.
FIXABLE = frozenset({"ground_truth", "desired_index", "answer_prefix", "total_messages", "n_chars"})
_RANDOM_STRING = re.compile(RANDOM_STRING_PATTERN)


class RepairResult(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    report: ValidationReport
    output: str
    kept: int = 0
    fixed: int = 0
    dropped: int = 0
    changes: list[str] = Field(default_factory=list, description="one line per fixed or dropped-with-reason row")


def fix_record(record: dict[str, Any], *, file: str = "<row>", row: int = 0) -> tuple[dict[str, Any], list[str]] | None:
    """The row with answer, desired_msg_index and counts rebuilt from the prompt and the query's
    ordinal, or None when that is not unambiguous (needle count off, needle responses that
    coincide, a random string that disagrees, an unparsable prompt or query...)."""
    result, ctx = analyze_row(record, file=file, row=row, count_tokens=False)
    errors = {f.check for f in result.findings if f.is_error}
    if not errors <= FIXABLE:
        return None
    messages, k, needles = ctx.messages, ctx.k, ctx.needles
    rs = record.get("random_string_to_prepend")
    if messages is None or k is None or ctx.ask is None or not isinstance(rs, str):
        return None
    if not _RANDOM_STRING.match(rs) or rs != ctx.random_string:
        return None
    if len(needles) != record.get("n_needles") or not 1 <= k <= len(needles):
        return None
    target = needles[k - 1]
    if target + 1 >= len(messages) - 1 or messages[target + 1]["role"] != "assistant":
        return None
    fixed = dict(record)
    fixed["answer"] = rs + messages[target + 1]["content"]
    fixed["desired_msg_index"] = target
    fixed["total_messages"] = len(messages)
    fixed["n_chars"] = sum(len(m["content"]) for m in messages)
    notes = []
    for column in ("desired_msg_index", "total_messages", "n_chars"):
        if fixed[column] != record.get(column):
            notes.append(f"{column} {record.get(column)} -> {fixed[column]}")
    if fixed["answer"] != record.get("answer"):
        was = next((f.message.split("; ", 1)[-1] for f in result.findings if f.check == "ground_truth"), None)
        reason = was or next((f.message for f in result.findings if f.check == "answer_prefix"), "differed")
        notes.append(f"answer <- random string + messages[{target + 1}] (response to the {ordinal(k)} needle); before: {reason}")
    return fixed, notes


def repair(
    paths: Sequence[str | os.PathLike],
    output: str | os.PathLike,
    *,
    mode: Literal["clean", "fix"] = "clean",
    tokens: bool = True,
    workers: int | None = None,
    progress: ProgressCallback | None = None,
    on_change: Callable[[str], None] | None = None,
    tokenizer: str | None = None,
) -> RepairResult:
    """Validate `paths` and write the rows with no error (plus, with `mode="fix"`, the rows whose
    ground truth is recoverable, rewritten) to `output`, atomically, with the input schema."""
    output = Path(output)
    files, _ = expand_paths(paths)
    if any(_same_file(output, f) for f in files):
        raise ValueError(f"output {output} is one of the inputs; the input is never modified")
    builder = ReportBuilder()
    result = RepairResult(report=ValidationReport(), output=str(output))

    def note(line: str) -> None:
        result.changes.append(line)
        if on_change:
            on_change(line)

    with atomic_path(output) as tmp:
        writer: pq.ParquetWriter | None = None
        out_schema: pa.Schema | None = None
        try:
            for scan, batch, results in iter_validate(
                paths, tokens=tokens, workers=workers, progress=progress, builder=builder, tokenizer=tokenizer
            ):
                if out_schema is None and scan.schema_ok:
                    out_schema = scan.schema
                    writer = pq.ParquetWriter(tmp, out_schema, compression="zstd")
                if out_schema is None or not scan.schema_ok or scan.schema.names != out_schema.names:
                    result.dropped += batch.num_rows
                    continue
                if all(not r.has_error for r in results):
                    result.kept += batch.num_rows
                    writer.write_batch(batch.cast(out_schema) if batch.schema != out_schema else batch)
                    continue
                records = batch.to_pylist()
                out_records = []
                for record, row_result in zip(records, results):
                    where = f"{scan.file}:{row_result.row}"
                    if not row_result.has_error:
                        out_records.append(record)
                        result.kept += 1
                        continue
                    fixed = fix_record(record, file=scan.file, row=row_result.row) if mode == "fix" else None
                    if fixed is not None:
                        new_record, notes = fixed
                        again = check_row(new_record, file=scan.file, row=row_result.row, count_tokens=tokens)
                        if not again.has_error:
                            out_records.append(new_record)
                            result.fixed += 1
                            note(f"{where}: fixed: " + "; ".join(notes))
                            continue
                    result.dropped += 1
                    checks = sorted({f.check for f in row_result.findings if f.is_error})
                    note(f"{where}: dropped ({', '.join(checks)})")
                if out_records:
                    writer.write_batch(pa.RecordBatch.from_pylist(out_records, schema=out_schema))
            if writer is None:
                from .._parquet import MRCR_SCHEMA

                writer = pq.ParquetWriter(tmp, out_schema or MRCR_SCHEMA, compression="zstd")
        finally:
            if writer is not None:
                writer.close()
    result.report = builder.build()
    return result


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.exists() and os.path.samefile(a, b)
    except OSError:
        return False
