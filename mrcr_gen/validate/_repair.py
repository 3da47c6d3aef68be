"""`--clean` / `--fix`: write the good rows (and, with fix, the recoverable ones) to a new file,
atomically and with the input schema. The input is never modified."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .._files import ForeignFile
from ..engines import Engine
from ._files import ProgressCallback, expand_paths, iter_validate
from ._findings import Finding, ReportBuilder, RowResult, ValidationReport, as_errors
from ._spec import Batch, CheckContext, CheckSpec, FileScan, RowWriter


class FileRepair(BaseModel):
    """What `--clean`/`--fix` did with one input file."""

    input: str
    output: str | None = Field(
        default=None, description="None when nothing could be written (unreadable file, file-level error)"
    )
    kept: int = 0
    fixed: int = 0
    dropped: int = 0


class RepairResult(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    report: ValidationReport
    output: str
    files: list[FileRepair] = Field(default_factory=list)
    changes: list[str] = Field(default_factory=list, description="one line per fixed row and per dropped row or rows")

    @property
    def kept(self) -> int:
        return sum(f.kept for f in self.files)

    @property
    def fixed(self) -> int:
        return sum(f.fixed for f in self.files)

    @property
    def dropped(self) -> int:
        return sum(f.dropped for f in self.files)


def output_paths(files: Sequence[Path], output: Path) -> dict[Path, Path]:
    """Where each input file goes: `output` itself for a single file (unless it is a folder),
    else `output/<the file's path below the inputs' common folder>`."""
    if len(files) == 1 and not output.is_dir():
        return {files[0]: output}
    if output.exists() and not output.is_dir():
        raise ValueError(f"{output} is a file, but with {len(files)} input files the output is a folder")
    resolved = [f.resolve() for f in files]
    root = Path(os.path.commonpath([f.parent for f in resolved])) if resolved else output
    targets = {f: output / r.relative_to(root) for f, r in zip(files, resolved, strict=True)}
    if len(set(targets.values())) < len(targets):
        twice = next(f for f, r in zip(files, resolved, strict=True) if resolved.count(r) > 1)
        raise ValueError(f"{twice} is named twice among the inputs (through a link?); give it once")
    return targets


def repair(
    paths: Sequence[str | os.PathLike],
    output: str | os.PathLike,
    *,
    spec: CheckSpec,
    mode: Literal["clean", "fix"] = "clean",
    tokens: bool = True,
    workers: int | None = None,
    strict: bool = False,
    progress: ProgressCallback | None = None,
    on_change: Callable[[str], None] | None = None,
    engine: Engine | None = None,
    tokenizer: str | None = None,
    csv_filter: Callable[[Path], bool] | None = None,
) -> RepairResult:
    """Validate `paths` and write the rows with no error (plus, with `mode="fix"`, the rows whose
    ground truth is recoverable, rewritten) of each input file to its own output file, atomically,
    with that file's columns: `output` is the file for a single input file, else a folder (see
    `output_paths`). Every dropped row is reported through `on_change` with its checks; `strict`
    counts warnings as errors. `spec` is the recipe's checking declaration; `mode="fix"` needs its
    `fix_record`."""
    if mode == "fix" and spec.fix_record is None:
        raise ValueError("this recipe's rows cannot be fixed; use clean")
    output = Path(output)
    files, _ = expand_paths(paths, csv_filter)
    targets = output_paths(files, output)
    for target in targets.values():
        if any(_same_file(target, f) for f in files):
            raise ValueError(f"output {target} is one of the inputs; the input is never modified")
    for target in targets.values():  # checked before anything is written
        if target.exists() or target.is_symlink():
            raise ForeignFile(
                target, "remove it or choose another output", why="--clean and --fix write new files only"
            )
    builder = ReportBuilder(strict=strict, order=spec.check_names)
    result = RepairResult(report=ValidationReport(), output=str(output))

    def note(line: str) -> None:
        result.changes.append(line)
        if on_change:
            on_change(line)

    outputs = _Outputs(spec, targets, strict, mode, tokens, note)
    with ExitStack() as every_output:
        outputs.every_output = every_output
        for _scan, batch, results in iter_validate(
            paths,
            spec=spec,
            tokens=tokens,
            workers=workers,
            engine=engine,
            progress=progress,
            on_file_start=outputs.start,
            builder=builder,
            tokenizer=tokenizer,
            csv_filter=csv_filter,
        ):
            outputs.write(batch, results)
        outputs.finish()
    result.files = outputs.summaries
    result.report = builder.build()
    return result


class _Outputs:
    """The output files of one repair, one at a time (the pipeline reads one input file at a time)."""

    def __init__(
        self,
        spec: CheckSpec,
        targets: dict[Path, Path],
        strict: bool,
        mode: str,
        tokens: bool,
        note: Callable[[str], None],
    ) -> None:
        self.spec, self.targets, self.strict = spec, targets, strict
        self.mode, self.tokens, self.note = mode, tokens, note
        self.every_output = ExitStack()  # set by `repair`: closing it on an exception removes partial files
        self.current: _FileOutput | None = None
        self.summaries: list[FileRepair] = []

    def finish(self) -> None:
        if self.current is not None:
            self.current.finish(self.every_output, self.note)
            self.summaries.append(self.current.summary)
            self.current = None

    def start(self, scan: FileScan) -> None:
        self.finish()
        self.current = _FileOutput(scan, self.targets[Path(scan.file)], self.strict, self.spec)

    def write(self, batch: Batch | None, results: list[RowResult]) -> None:
        if self.current is None or batch is None:  # the pipeline starts every file before its rows
            raise RuntimeError("rows arrived before their file started")
        self.current.write(self.every_output, batch, results, self.mode, self.tokens, self.note)


class _FileOutput:
    """The output of one input file: opened at its first writable batch, committed when done."""

    def __init__(self, scan: FileScan, target: Path, strict: bool, spec: CheckSpec) -> None:
        self.scan = scan
        self.spec = spec
        self.target = target
        self.strict = strict
        self.summary = FileRepair(input=scan.file)
        self.rows_seen = 0
        self.blocked: list[Finding] | None = None  # file-level findings that drop every row
        # The writer, and the stack whose closing commits the file: opened at the first writable batch.
        self._output: tuple[RowWriter, ExitStack] | None = None

    def _blocking(self) -> list[Finding]:
        findings = [*self.scan.early_findings, *self.scan.file_findings]
        return [f for f in findings if f.is_error or self.strict]

    def _open(self, every_output: ExitStack) -> tuple[RowWriter, ExitStack]:
        if self._output is None:
            # Closing this stack commits the file; an exception unwinding `every_output` first
            # removes the partial file instead.
            committed = every_output.enter_context(ExitStack())
            writer = committed.enter_context(self.spec.reader.writer(self.target, self.scan))
            self._output = (writer, committed)
        return self._output

    def write(
        self,
        every_output: ExitStack,
        batch: Batch,
        results: list[RowResult],
        mode: str,
        tokens: bool,
        note: Callable[[str], None],
    ) -> None:
        self.rows_seen += batch.num_rows
        if self.blocked is None:
            self.blocked = self._blocking()
        if self.blocked:
            return
        writer, _ = self._open(every_output)
        results = [as_errors(r) for r in results] if self.strict else results
        if all(not r.has_error for r in results):
            self.summary.kept += batch.num_rows
            writer.write_batch(batch)
            return
        out_records = []
        for record, row_result in zip(batch.to_pylist(), results, strict=True):
            if not row_result.has_error:
                self.summary.kept += 1
                out_records.append(record)
            elif (fixed := self._fixed(record, row_result, mode, tokens, note)) is not None:
                out_records.append(fixed)
        writer.write_records(out_records)

    def _fixed(
        self, record: dict, row_result: RowResult, mode: str, tokens: bool, note: Callable[[str], None]
    ) -> dict | None:
        """The row rewritten (`--fix`) when that leaves no error, else None (the row is dropped);
        counts and notes either."""
        where = f"{self.scan.file}:{row_result.row}"
        fix = self.spec.fix_record if mode == "fix" else None
        fixed = fix(record, file=self.scan.file, row=row_result.row) if fix is not None else None
        context = CheckContext(file=self.scan.file, count_tokens=tokens, tokenizer=self.scan.tokenizer)
        if fixed is not None and fixed[0] != record:  # a "fix" that changes nothing leaves the error
            new_record, notes = fixed
            again = self.spec.checker(context).check(new_record, row_result.row)
            if not (as_errors(again) if self.strict else again).has_error and not self._beyond_the_row(
                record, row_result, context
            ):
                self.summary.fixed += 1
                note(f"{where}: fixed: " + "; ".join(notes))
                return new_record
        self.summary.dropped += 1
        checks = sorted({f.check for f in row_result.findings if f.is_error})
        note(f"{where}: dropped ({', '.join(checks)})")
        return None

    def _beyond_the_row(self, record: dict, row_result: RowResult, context: CheckContext) -> bool:
        """Whether the row has errors its checker alone does not find (a duplicate of another row, a
        bin its sidecar records): no fix of the row itself can remove them."""
        alone = self.spec.checker(context).check(record, row_result.row)
        return bool({f.check for f in row_result.findings if f.is_error} - {f.check for f in alone.findings})

    def finish(self, every_output: ExitStack, note: Callable[[str], None]) -> None:
        """Commit the output (empty when every row was dropped) and account for the rows never
        written: all of them on a file-level error, the rest when reading stopped half-way."""
        scan = self.scan
        blocked = self.blocked if self.blocked is not None else self._blocking()
        if blocked:
            self.summary.dropped = scan.rows_known
            if scan.rows_known:
                note(f"{scan.file}:0-{scan.rows_known - 1}: dropped, every row ({_reason(blocked)})")
            else:
                note(f"{scan.file}: not written ({_reason(blocked)})")
            return
        _, committed = self._open(every_output)
        committed.close()
        self.summary.output = str(self.target)
        unread = scan.rows_known - self.rows_seen
        if scan.num_rows is not None and unread > 0:
            self.summary.dropped += unread
            stopped = [f for f in scan.file_findings if f.check == "file"]
            why = _reason(stopped) if stopped else "the file ended early"
            note(f"{scan.file}:{self.rows_seen}-{scan.num_rows - 1}: dropped, not read ({why})")


def _reason(findings: list[Finding]) -> str:
    first = findings[0]
    more = f" and {len(findings) - 1} more" if len(findings) > 1 else ""
    return f"{first.check}: {first.message}{more}"


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.exists() and os.path.samefile(a, b)
    except OSError:
        return False
