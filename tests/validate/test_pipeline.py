"""The validation pipeline with a recipe of its own: a checker that keeps state across the rows of a
file (a cross-row check), findings independent of the workers and of how a file is cut into units."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any
from unittest import mock

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mrcr_gen.engines import LocalEngine
from mrcr_gen.validate import (
    CheckContext,
    CheckingDefaults,
    CheckSpec,
    Finding,
    ParquetRows,
    RowResult,
    _files,
    validate_paths,
)

SCHEMA = pa.schema([("text", pa.string())])


def _finding(context: CheckContext, row: int | None, check: str, message: str) -> Finding:
    return Finding(file=context.file, row=row, check=check, severity="error", message=message)


class Duplicates:
    """Flags a row whose text an earlier row of the same file has (state across rows), and says at
    the end how many rows it saw."""

    def __init__(self, context: CheckContext) -> None:
        self.context = context
        self.seen: dict[str, int] = {}
        self.rows = 0

    def check(self, record: dict[str, Any], row: int) -> RowResult:
        self.rows += 1
        first = self.seen.setdefault(record["text"], row)
        if first == row:
            return RowResult(row=row)
        return RowResult(row=row, findings=(_finding(self.context, row, "duplicate", f"same text as row {first}"),))

    def finish(self) -> list[Finding]:
        return [_finding(self.context, None, "rows_seen", f"{self.rows} rows")]


class Bad:
    """Flags each row whose text is "bad" (rows on their own: a file may be cut into units)."""

    def __init__(self, context: CheckContext) -> None:
        self.context = context

    def check(self, record: dict[str, Any], row: int) -> RowResult:
        if record["text"] != "bad":
            return RowResult(row=row)
        return RowResult(row=row, findings=(_finding(self.context, row, "bad", "a bad row"),))

    def finish(self) -> list[Finding]:
        return []


WHOLE = CheckSpec(reader=ParquetRows(SCHEMA), checker=Duplicates, check_names=("file", "duplicate"), whole_files=True)
ROWWISE = CheckSpec(reader=ParquetRows(SCHEMA), checker=Bad, check_names=("file", "schema", "bad"))


class InlineEngine:
    """An engine of `workers` that runs its units here, in order (the pipeline plans as for a pool)."""

    name = "inline"

    def __init__(self, workers: int) -> None:
        self.workers = workers

    def map(self, fn: Callable[..., Any], units: Iterable[tuple], **_: Any) -> Iterable[Any]:
        return (fn(*unit) for unit in units)

    def close(self) -> None:
        pass

    def __enter__(self) -> InlineEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def write(path: Path, texts: list[str], row_group_size: int = 2) -> Path:
    pq.write_table(pa.table({"text": texts}, schema=SCHEMA), path, row_group_size=row_group_size)
    return path


def test_a_checker_keeps_state_across_the_rows_of_a_file(tmp_path: Path) -> None:
    one = write(tmp_path / "a.parquet", ["x", "y", "x", "z", "y"])
    two = write(tmp_path / "b.parquet", ["x", "q"])  # its own state: "x" is new here
    report = validate_paths([one, two], spec=WHOLE, tokens=False, workers=2)
    found = [(Path(f.file).name, f.row, f.check, f.message) for f in report.findings]
    assert found == [
        ("a.parquet", 2, "duplicate", "same text as row 0"),
        ("a.parquet", 4, "duplicate", "same text as row 1"),
        ("a.parquet", None, "rows_seen", "5 rows"),
        ("b.parquet", None, "rows_seen", "2 rows"),
    ]
    assert report.summary.rows_with_errors == 2
    assert list(report.summary.by_check) == ["duplicate", "rows_seen"]  # the recipe's order, then by name


def test_the_declaration_pickles_into_pool_workers(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(_files, "POOL_MIN_BYTES", 0)
    monkeypatch.setattr(_files, "MIN_UNIT_BYTES", 1)
    path = write(tmp_path / "p.parquet", ["a", "bad", "c", "bad", "e", "f", "bad"])
    with LocalEngine(2) as engine:
        pooled = validate_paths([path], spec=ROWWISE, tokens=False, engine=engine)
    assert pooled == validate_paths([path], spec=ROWWISE, tokens=False, workers=1)
    assert [f.row for f in pooled.findings] == [1, 3, 6]


class Recipe(CheckingDefaults):
    def checking(self) -> CheckSpec:
        return ROWWISE


def test_checking_defaults_validate_and_clean_through_the_declaration(tmp_path: Path) -> None:
    from mrcr_gen._request import ValidateRequest

    path = write(tmp_path / "in.parquet", ["a", "bad", "c"])
    recipe = Recipe()
    assert recipe.repair_refusal("fix") is None
    checked = recipe.validate([str(path)], ValidateRequest(tokens=False))
    assert [f.row for f in checked.report.findings] == [1] and checked.files == []
    out = tmp_path / "out.parquet"
    cleaned = recipe.validate([str(path)], ValidateRequest(tokens=False, mode="clean", out=out))
    assert (cleaned.kept, cleaned.dropped) == (2, 1)
    assert pq.read_table(out).column("text").to_pylist() == ["a", "c"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    texts=st.lists(st.sampled_from(["a", "b", "bad"]), min_size=0, max_size=12),
    row_group_size=st.integers(1, 5),
    workers=st.integers(1, 4),
)
def test_findings_do_not_depend_on_workers_or_units(
    tmp_path_factory, texts: list[str], row_group_size: int, workers: int
) -> None:
    """Invariant: however a file is cut into units and over however many workers, the report is the
    one a single checker over the whole file gives (rows on their own, and rows with shared state)."""
    path = write(tmp_path_factory.mktemp("h") / "h.parquet", texts or ["a"], row_group_size)
    for spec in (ROWWISE, WHOLE):
        alone = validate_paths([path], spec=spec, tokens=False, workers=1)
        with mock.patch.object(_files, "MIN_UNIT_BYTES", 1):
            cut = validate_paths([path], spec=spec, tokens=False, engine=InlineEngine(workers))
        assert cut == alone
    expected = [row for row, text in enumerate(texts or ["a"]) if text == "bad"]
    assert [f.row for f in validate_paths([path], spec=ROWWISE, tokens=False).findings] == expected
