"""Findings and reports of the validator: the shapes `mrcr-validate --json` writes."""

from __future__ import annotations

from collections import Counter
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .._bins import label_sort_key
from ._shortcuts import ProbeOutcome, ShortcutReport, ShortcutTally, shortcut_message

Severity = Literal["error", "warning"]

#: `by_bin` key of rows whose tokens were not counted (`--no-tokens`, or the prompt is unreadable).
NOT_COUNTED = "not counted"
#: `by_bin` key of rows whose token count lies outside every bin.
OUT_OF_RANGE = "out of range"
#: The `file` of a `shortcut` finding: it is about the rows of every file checked together.
SHORTCUT_FILE = "(all files)"


class Finding(BaseModel):
    """One defect: where (`file`, 0-based `row`, None for file-level), which check, and what."""

    model_config = ConfigDict(frozen=True)

    file: str
    row: int | None
    check: str
    severity: Severity
    message: str

    @property
    def is_error(self) -> bool:
        return self.severity == "error"


class RowResult(BaseModel):
    """Everything the validator learned about one row."""

    model_config = ConfigDict(frozen=True)

    row: int
    findings: tuple[Finding, ...] = ()
    n_tokens: int | None = None
    bin: str | None = Field(default=None, description="bin label, OUT_OF_RANGE, or None when not counted")
    n_needles: int | None = None
    probe: ProbeOutcome | None = Field(default=None, description="the shortcut probes (`--shortcuts`), else None")
    #: Digests of the whole row and of its prompt, from the worker to the duplicate checks (`_duplicates`).
    digest: str | None = Field(default=None, exclude=True)
    prompt_digest: str | None = Field(default=None, exclude=True)

    @property
    def has_error(self) -> bool:
        return any(f.is_error for f in self.findings)


def as_errors(result: RowResult) -> RowResult:
    """The result with its warnings made errors (`--strict`)."""
    if all(f.is_error for f in result.findings):
        return result
    return result.model_copy(update={"findings": tuple(_as_error(f) for f in result.findings)})


def _as_error(finding: Finding) -> Finding:
    return finding if finding.is_error else finding.model_copy(update={"severity": "error"})


class Summary(BaseModel):
    files: int = 0
    rows: int = 0
    rows_with_errors: int = 0
    by_check: dict[str, int] = Field(default_factory=dict)
    by_bin: dict[str, dict[str, int]] = Field(default_factory=dict, description="bin label -> n_needles -> rows")
    tokenizers: dict[str, str] = Field(
        default_factory=dict, description="file -> spec of the tokenizer that recounted it (and binned `by_bin`)"
    )
    hub_sources: dict[str, str] = Field(
        default_factory=dict, description="file -> the pinned hf://datasets/ORG/NAME@COMMIT/PATH it was downloaded from"
    )
    shortcuts: ShortcutReport | None = Field(default=None, description="`--shortcuts`: the probes; absent otherwise")


class ValidationReport(BaseModel):
    """`{"summary": {...}, "findings": [...]}` exactly as `--json` writes it."""

    summary: Summary = Field(default_factory=Summary)
    findings: list[Finding] = Field(default_factory=list)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.is_error]

    @property
    def unreadable(self) -> list[Finding]:
        """File-level `file` errors: inputs that could not be read (exit code 2)."""
        return [f for f in self.findings if f.check == "file" and f.is_error]

    @property
    def exit_code(self) -> int:
        if self.unreadable:
            return 2
        return 1 if self.errors else 0

    def to_json(self) -> str:
        exclude = {"summary": {"shortcuts"}} if self.summary.shortcuts is None else None
        return self.model_dump_json(indent=2, exclude=exclude)


class ReportBuilder:
    """Accumulates row results and file-level findings into a `ValidationReport`."""

    def __init__(self, *, strict: bool = False, order: tuple[str, ...] = ()) -> None:
        self.strict = strict  # warnings count as errors
        self.order = order  # the recipe's check names, in report order (`by_check`); others follow by name
        self._files: set[str] = set()
        self._rows = 0
        self._rows_with_errors = 0
        self._by_check: Counter[str] = Counter()
        self._by_bin: dict[str, Counter[str]] = {}
        self._tokenizers: dict[str, str] = {}
        self._hub_sources: dict[str, str] = {}
        self.findings: list[Finding] = []
        self.shortcuts: ShortcutTally | None = None  # `--shortcuts`: the probes of the rows seen

    def add_file(self, file: str) -> None:
        self._files.add(file)

    def add_source(self, file: str, tokenizer: str | None, hub_source: str | None) -> None:
        if tokenizer is not None:
            self._tokenizers[file] = tokenizer
        if hub_source is not None:
            self._hub_sources[file] = hub_source

    def add_finding(self, finding: Finding) -> None:
        if self.strict:
            finding = _as_error(finding)
        self.findings.append(finding)
        self._by_check[finding.check] += 1

    def add_row(self, result: RowResult) -> None:
        if self.strict:
            result = as_errors(result)
        self._rows += 1
        if result.has_error:
            self._rows_with_errors += 1
        for finding in result.findings:
            self.add_finding(finding)
        bin_key = result.bin if result.bin is not None else NOT_COUNTED
        needles = str(result.n_needles) if result.n_needles is not None else "?"
        self._by_bin.setdefault(bin_key, Counter())[needles] += 1
        if result.probe is not None:
            self.shortcuts = self.shortcuts or ShortcutTally()
            self.shortcuts.add(result.probe, bin_key, needles, rejected=result.has_error)

    def want_shortcuts(self) -> None:
        """Report the probes (an empty table when no row was probed)."""
        self.shortcuts = self.shortcuts or ShortcutTally()

    def build(self) -> ValidationReport:
        order = {name: i for i, name in enumerate(self.order)}
        by_check = dict(sorted(self._by_check.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])))
        by_bin = {
            key: dict(
                sorted(counts.items(), key=lambda kv: (not kv[0].isdigit(), int(kv[0]) if kv[0].isdigit() else 0))
            )
            for key, counts in sorted(self._by_bin.items(), key=lambda kv: label_sort_key(kv[0]))
        }
        summary = Summary(
            files=len(self._files),
            rows=self._rows,
            rows_with_errors=self._rows_with_errors,
            by_check=by_check,
            by_bin=by_bin,
            tokenizers=self._tokenizers,
            hub_sources=self._hub_sources,
            shortcuts=self.shortcuts.build() if self.shortcuts is not None else None,
        )
        findings = list(self.findings)
        for group in summary.shortcuts.groups if summary.shortcuts is not None else ():
            if group.shortcut:
                findings.append(
                    Finding(
                        file=SHORTCUT_FILE,
                        row=None,
                        check="shortcut",
                        severity="error",
                        message=shortcut_message(group),
                    )
                )
                summary.by_check["shortcut"] = summary.by_check.get("shortcut", 0) + 1
        return ValidationReport(summary=summary, findings=findings)


def one_line(exc: BaseException) -> str:
    """An exception as one line: its type and the first line of its message."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def merge_reports(first: ValidationReport, second: ValidationReport) -> ValidationReport:
    """One report from two (files of two recipes, validated separately): `first`'s, then `second`'s."""
    merged = first.model_copy(deep=True)
    s, t = merged.summary, second.summary
    s.files += t.files
    s.rows += t.rows
    s.rows_with_errors += t.rows_with_errors
    for name, count in t.by_check.items():
        s.by_check[name] = s.by_check.get(name, 0) + count
    s.tokenizers.update(t.tokenizers)
    s.hub_sources.update(t.hub_sources)
    if t.shortcuts is not None:
        s.shortcuts = t.shortcuts if s.shortcuts is None else s.shortcuts.merged(t.shortcuts)
    for label, counts in t.by_bin.items():
        into = s.by_bin.setdefault(label, {})
        for needles, count in counts.items():
            into[needles] = into.get(needles, 0) + count
    merged.findings += second.findings
    return merged
