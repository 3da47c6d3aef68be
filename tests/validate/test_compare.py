"""`mrcr-validate DIR --compare REF`: the health report of two sets side by side, and its bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mrcr_gen import health_report
from mrcr_gen.validate._health import Spread, trigram_share, zlib_ratio
from tests.support.rowkit import make_row, write_rows
from tests.validate.test_cli import run

REAL = Path(__file__).resolve().parents[2] / ".." / "shared" / "mrcr-real" / "mrcr_real_rows.parquet"


@pytest.fixture
def sets(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    write_rows(tmp_path / "a" / "x.parquet", [make_row(s, n_needles=2, pairs=20) for s in range(6)])
    write_rows(tmp_path / "b" / "y.parquet", [make_row(s, n_needles=4, pairs=30) for s in range(10, 14)])
    return tmp_path / "a", tmp_path / "b"


def test_both_sides_side_by_side(capsys, sets, tmp_path: Path) -> None:
    data, reference = sets
    code, out, _ = run(capsys, data, "--compare", reference, "--no-tokens", "--json", tmp_path / "h.json")
    assert code == 0 and "health report (openai-mrcr)" in out and "needle depth" in out
    report = json.loads((tmp_path / "h.json").read_text())
    mine, theirs = report["data"], report["reference"]
    assert (mine["rows"], theirs["rows"]) == (6, 4) and mine["recipe"] == theirs["recipe"] == "openai-mrcr"
    assert mine["needle_depth"]["count"] == 12 and theirs["needle_depth"]["count"] == 16
    assert mine["target_depth"]["count"] == 6 and 0 < mine["target_depth"]["median"] < 1
    assert set(mine["probes"]) == {"depth", "first", "last", "random", "longest", "shortest", "final_turn"}
    assert abs(sum(f["share"] for f in mine["formats"].values()) - 1) < 1e-9
    assert mine["formats"]["poem"]["tokens"]["count"] > 0 and mine["floors"]["random_needle"] is not None
    assert 0 < mine["trigram_share"] <= 1 and 0 < mine["zlib_ratio"] < 1


def test_the_library_function_gives_the_same(sets) -> None:
    data, reference = sets
    comparison, report = health_report([data], [reference], tokens=False)
    assert report.exit_code == 0 and comparison.data.files == 1 and comparison.reference.rows == 4


@pytest.mark.parametrize("bad", ["empty", "junk", "missing"])
def test_bad_reference_is_one_line_and_nothing_written(capsys, sets, tmp_path: Path, bad: str) -> None:
    data, _ = sets
    reference = tmp_path / f"{bad}.parquet"
    if bad == "empty":
        write_rows(reference, [])
    elif bad == "junk":
        reference.write_text("not parquet")
    out = tmp_path / "h.json"
    code, _, err = run(capsys, data, "--compare", reference, "--no-tokens", "--json", out, "-q")
    assert code == 2 and err.count("\n") == 1 and err.startswith("mrcr-validate: error: ") and not out.exists()


def test_compare_refuses_what_it_cannot_honour(capsys, sets, tmp_path: Path) -> None:
    data, reference = sets
    code, _, err = run(capsys, data, "--compare", reference, "--clean", tmp_path / "o")
    assert code == 2 and "--compare writes nothing" in err and not (tmp_path / "o").exists()
    for option in (["--strict"], ["--engine", "ray"]):
        code, _, err = run(capsys, data, "--compare", reference, *option)
        assert code == 2 and err.count("\n") == 1 and "without --strict/--engine" in err


def test_statistics_by_hand() -> None:
    assert trigram_share(["a b c a b c"]) == 3 / 4  # abc bca cab abc
    assert trigram_share(["a b", "c"]) is None
    assert zlib_ratio([]) is None and 0 < zlib_ratio(["x" * 1000]) < 0.1
    assert Spread.of([1, 2, 3, 4, 5]).model_dump() == {"count": 5, "p10": 1.4, "median": 3.0, "p90": 4.6}


@pytest.mark.skipif(not REAL.is_file(), reason="the real rows in ../shared/mrcr-real are absent")
def test_official_rows_as_the_reference(sets) -> None:
    data, _ = sets
    comparison, _ = health_report([data], [REAL], tokens=False)
    real = comparison.reference
    assert real.rows == 3 and len(real.formats) == 10  # the ten formats of openai/mrcr
    assert 0.8 < (real.trigram_share or 0) < 0.9 and (real.formats["riddle"].tokens.median or 0) < 100
