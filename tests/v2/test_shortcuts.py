"""`mrcr-validate --shortcuts` on MRCR v2 files: every row probed, by bucket and needle count."""

from __future__ import annotations

from pathlib import Path

from mrcr_gen.recipes import found_csv
from mrcr_gen.recipes.mrcr_v2._validate import SPEC as V2_SPEC
from mrcr_gen.validate import validate_paths


def test_v2_rows_are_probed(v2_data: Path) -> None:
    report = validate_paths([v2_data], spec=V2_SPEC, tokens=True, shortcuts=True, csv_filter=found_csv)
    shortcuts = report.summary.shortcuts
    assert shortcuts is not None and not shortcuts.skipped
    assert {(g.bin, g.n_needles) for g in shortcuts.groups} == {
        ("(4096, 8192]", "2"),
        ("(4096, 8192]", "4"),
        ("(8192, 16384]", "2"),
        ("(8192, 16384]", "4"),
    }
    assert all(g.rows == 6 and 0 <= g.observed <= 1 for g in shortcuts.groups)
