"""Issue 33's checks on MRCR v2 files: duplicated rows, look-alike keys, needle writings as good
as the target."""

from __future__ import annotations

from pathlib import Path

from mrcr_gen.recipes.mrcr_v2 import iter_records, validate_v2_paths
from tests.v2.test_validate import _distractor_turn, _edit_turn, _lone, _needle_ask, rewrite


def test_duplicated_csv_rows_are_errors(v2_csv: Path, tmp_path: Path) -> None:
    bad = tmp_path / "mrcr_v2_4needle_in_(8192,16384).csv"
    rewrite(v2_csv, bad, lambda records: records.extend(records[:3]))
    report = validate_v2_paths([bad], tokens=False).report
    n = sum(1 for _ in iter_records(v2_csv))
    assert [(f.row, f.check) for f in report.findings] == [(n + i, "duplicate_row") for i in range(3)]
    assert report.exit_code == 1


def test_a_look_alike_key_is_an_error(v2_csv: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    lone = _lone(list(iter_records(v2_csv)))  # a row whose key no other row asks about

    def mutate(records: list[dict]) -> None:
        record = records[lone]
        _edit_turn(record, _distractor_turn(record), ask=_needle_ask(record).lower().rstrip("."))

    rewrite(v2_csv, bad, mutate)
    (finding,) = validate_v2_paths([bad], tokens=False).report.findings
    assert (finding.row, finding.check, finding.severity) == (lone, "needle_ask_elsewhere", "error")
    assert "but for case or punctuation" in finding.message


def test_a_header_only_csv_is_bad_input(capsys, tmp_path: Path) -> None:
    import pytest

    from mrcr_gen.cli._validate import validate_main
    from mrcr_gen.recipes.mrcr_v2 import V2_COLUMNS

    empty = tmp_path / "header.csv"
    empty.write_text(",".join(V2_COLUMNS) + "\n", encoding="utf-8")
    for extra in ((), ("--clean", str(tmp_path / "out.csv"))):
        with pytest.raises(SystemExit) as exc:
            validate_main([str(empty), "-q", *extra])
        err = capsys.readouterr().err
        assert exc.value.code == 2 and err.endswith(f"mrcr-validate: error: {empty}: holds no rows\n")
        assert "Traceback" not in err and not (tmp_path / "out.csv").exists()


def test_an_openai_csv_is_one_line_and_exit_2(capsys, tmp_path: Path) -> None:
    import pytest

    from mrcr_gen.cli._validate import validate_main

    other = tmp_path / "openai.csv"
    other.write_text("prompt,answer,random_string_to_prepend,n_needles\n[],x,abcdefghij,2\n", encoding="utf-8")
    with pytest.raises(SystemExit) as exc:
        validate_main([str(other), "-q"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and "not a file of any known recipe" in err


def test_the_bucket_in_the_file_name_is_checked_without_a_sidecar(v2_csv: Path, tmp_path: Path) -> None:
    import shutil

    wrong = tmp_path / "mrcr_v2_4needle_in_(16384,32768).csv"  # the rows are (8192, 16384]
    shutil.copy(v2_csv, wrong)
    report = validate_v2_paths([wrong]).report
    n = sum(1 for _ in iter_records(v2_csv))
    assert [(f.row, f.check) for f in report.findings] == [(i, "token_bin") for i in range(n)]
    assert "the file name says bucket (16384, 32768]" in report.findings[0].message
    right = tmp_path / "mrcr_v2_4needle_in_(8192,16384).csv"
    shutil.copy(v2_csv, right)
    assert validate_v2_paths([right]).report.findings == []


def test_compare_refuses_another_recipe_and_a_mixed_folder(capsys, v2_csv: Path, tmp_path: Path) -> None:
    import shutil

    import pytest

    from mrcr_gen.cli._validate import validate_main
    from tests.support.rowkit import make_row, write_rows

    openai = (
        write_rows(tmp_path / "a" / "x.parquet", [make_row(s) for s in range(3)])
        if (tmp_path / "a").mkdir() is None
        else None
    )
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    shutil.copy(v2_csv, mixed / v2_csv.name)
    shutil.copy(openai, mixed / "x.parquet")
    for reference, says in (
        (v2_csv, "MRCR v2 files, but DIR holds openai/mrcr files"),
        (mixed, "compare one recipe's files"),
    ):
        with pytest.raises(SystemExit) as exc:
            validate_main(
                [str(openai), "--compare", str(reference), "--no-tokens", "-q", "--json", str(tmp_path / "h.json")]
            )
        err = capsys.readouterr().err
        assert exc.value.code == 2 and err.count("\n") == 1 and says in err, err
        assert not (tmp_path / "h.json").exists()


def test_compare_two_v2_sets(v2_data: Path) -> None:
    from mrcr_gen import health_report

    comparison, report = health_report([v2_data / "2needle"], [v2_data / "4needle"], tokens=False)
    assert comparison.data.recipe == comparison.reference.recipe == "mrcr-v2"
    assert comparison.data.rows == 12 and comparison.reference.needle_depth.count == 48
    assert "(unknown)" not in comparison.data.formats and report.exit_code == 0
