"""Issue 33's checks on MRCR v2 files: duplicated rows, look-alike keys, needle writings as good
as the target."""

from __future__ import annotations

from pathlib import Path

from mrcr_gen.recipes.mrcr_v2 import iter_records, validate_v2_paths
from tests.v2.test_validate import _distractor_turn, _edit_turn, _needle_ask, rewrite


def test_duplicated_csv_rows_are_errors(v2_csv: Path, tmp_path: Path) -> None:
    bad = tmp_path / "mrcr_v2_4needle_in_(8192,16384).csv"
    rewrite(v2_csv, bad, lambda records: records.extend(records[:3]))
    report = validate_v2_paths([bad], tokens=False).report
    n = sum(1 for _ in iter_records(v2_csv))
    assert [(f.row, f.check) for f in report.findings] == [(n + i, "duplicate_row") for i in range(3)]
    assert report.exit_code == 1


def test_a_look_alike_key_is_an_error(v2_csv: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"

    def mutate(records: list[dict]) -> None:
        _edit_turn(records[2], _distractor_turn(records[2]), ask=_needle_ask(records[2]).lower().rstrip("."))

    rewrite(v2_csv, bad, mutate)
    (finding,) = validate_v2_paths([bad], tokens=False).report.findings
    assert (finding.row, finding.check, finding.severity) == (2, "needle_ask_elsewhere", "error")
    assert "but for case or punctuation" in finding.message
