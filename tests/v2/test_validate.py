"""mrcr-validate on MRCR v2 files: clean data passes; each injected defect is caught by name."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

import pytest

from mrcr_gen.recipes.mrcr_v2 import V2_COLUMNS, iter_records, validate_v2_paths
from mrcr_gen.recipes.mrcr_v2._rows import V2FileWriter, coerce_record
from mrcr_gen.recipes.mrcr_v2._text import HASH_LENGTH


def rewrite(source: Path, target: Path, mutate) -> None:
    records = [dict(r) for r in iter_records(source)]
    mutate(records)
    with open(target, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(V2_COLUMNS)
        for record in records:
            writer.writerow([record[c] for c in V2_COLUMNS])


def checks(path: Path) -> dict[int, set[str]]:
    report = validate_v2_paths([path]).report
    found: dict[int, set[str]] = {}
    for finding in report.findings:
        found.setdefault(finding.row, set()).add(finding.check)
    return found


def test_generated_data_is_clean(v2_data):
    from mrcr_gen.cli._validate import validate_main

    with pytest.raises(SystemExit) as exit_info:
        validate_main([str(v2_data), "--json", str(v2_data.parent / "report.json"), "--quiet"])
    assert exit_info.value.code == 0
    report = json.loads((v2_data.parent / "report.json").read_text())
    assert report["summary"]["rows"] == 24 and report["findings"] == []
    assert report["summary"]["by_bin"] == {"(4096, 8192]": {"2": 6, "4": 6}, "(8192, 16384]": {"2": 6, "4": 6}}


def _swap_to_other_ordinal(records):
    from tests.support.v2_resolve import solve

    solved = solve(records[1]["queries"])
    other = solved.ordinal % len(solved.writings)  # 0-based index of another ordinal's writing
    records[1]["answer"] = solved.hash + solved.writings[other]


def _reuse_hash(records):
    # row 1 asks about a different key of the same transcript than row 0? find such a pair
    from tests.support.v2_resolve import solve

    first = solve(records[0]["queries"])
    for record in records[1:]:
        solved = solve(record["queries"])
        same_transcript = record["queries"][: -len(record["view_ops"])] == records[0]["queries"][: -len(records[0]["view_ops"])]
        if same_transcript and solved.ask != first.ask:
            for column in ("queries", "view_ops", "answer"):
                record[column] = record[column].replace(solved.hash, first.hash)
            return
    raise AssertionError("no second key in the first transcript")


def _drop_a_needle(records):
    from tests.support.v2_resolve import solve

    solved = solve(records[2]["queries"])
    ask, writing, _ = solved.turns[solved.needle_turns[-1]]
    turn = f"User: {ask}\n\nAssistant: {writing}\n\n"
    records[2]["queries"] = records[2]["queries"].replace(turn, "", 1)


MUTATIONS = {
    "ground_truth": (_swap_to_other_ordinal, 1),
    "context_len": (lambda rs: rs[0].update(context_len=str(int(rs[0]["context_len"]) + 1)), 0),
    "answer_token_count": (lambda rs: rs[3].update(answer_token_count=str(int(rs[3]["answer_token_count"]) - 1)), 3),
    "view_ops": (lambda rs: rs[0].update(view_ops=rs[0]["view_ops"].replace("Prepend", "Append")), 0),
    "needle_count": (_drop_a_needle, 2),
    "positions": (lambda rs: rs[4].update(answer_context_position="(0, 1)"), 4),
    "v2_row": (lambda rs: rs[5].update(relevant_context_positions="[(1, 2"), 5),
}


@pytest.mark.parametrize("check", sorted(MUTATIONS))
def test_each_defect_is_caught(v2_csv, tmp_path, check):
    mutate, row = MUTATIONS[check]
    bad = tmp_path / "bad.csv"
    rewrite(v2_csv, bad, mutate)
    found = checks(bad)
    assert check in found.get(row, set()), found
    assert set(found) == {row}  # the other rows stay clean


def test_a_hash_shared_by_two_keys_is_caught(v2_csv, tmp_path):
    bad = tmp_path / "bad.csv"
    rewrite(v2_csv, bad, _reuse_hash)
    found = checks(bad)
    assert any("hash_key" in c for c in found.values()), found


def test_clean_keeps_the_good_rows_and_exit_codes(v2_csv, tmp_path, capsys):
    from mrcr_gen.cli._validate import validate_main

    bad = tmp_path / "bad.csv"
    rewrite(v2_csv, bad, MUTATIONS["ground_truth"][0])
    for out in (tmp_path / "clean.csv", tmp_path / "clean.parquet"):
        with pytest.raises(SystemExit) as exit_info:
            validate_main([str(bad), "--clean", str(out)])
        assert exit_info.value.code == 1
        kept = [coerce_record(r) for r in iter_records(out)]
        assert len(kept) == 5
        assert checks(out) == {}
        assert "bad.csv:1: dropped (ground_truth)" in capsys.readouterr().err  # as for openai/mrcr files
    with pytest.raises(SystemExit) as exit_info:
        validate_main([str(bad), "--fix", str(tmp_path / "fixed.csv"), "--quiet"])
    assert exit_info.value.code == 2


def test_clean_of_several_files_writes_one_file_each(v2_data, tmp_path):
    from mrcr_gen.cli._validate import validate_main

    with pytest.raises(SystemExit) as exit_info:
        validate_main([str(v2_data), "--clean", str(tmp_path / "out"), "--quiet"])
    assert exit_info.value.code == 0
    written = sorted(p.relative_to(tmp_path / "out") for p in (tmp_path / "out").rglob("*.csv"))
    assert written == sorted(p.relative_to(v2_data) for p in v2_data.rglob("*.csv"))
    for path in (tmp_path / "out").rglob("*.csv"):
        assert path.read_bytes() == (v2_data / path.relative_to(tmp_path / "out")).read_bytes()


def test_parquet_and_csv_copies_validate_alike(v2_csv, tmp_path):
    copy = tmp_path / "copy.parquet"
    with V2FileWriter(copy, "parquet") as out:
        for record in iter_records(v2_csv):
            out.write(coerce_record(record))
    assert checks(copy) == {}


def test_a_csv_with_a_byte_order_mark_reads_as_its_header_says(v2_csv, tmp_path):
    """Excel and some writers start a UTF-8 CSV with a byte-order mark: it is not part of the first
    column's name, so the file validates clean and is recognised as MRCR v2."""
    from mrcr_gen.recipes import group_inputs, recipe_named

    MRCR_V2 = recipe_named("mrcr-v2")

    with_bom = tmp_path / "bom.csv"
    with_bom.write_bytes(b"\xef\xbb\xbf" + v2_csv.read_bytes())
    assert checks(with_bom) == {}
    assert group_inputs([str(tmp_path)]) == [(MRCR_V2, [str(with_bom)])]
    assert [r["answer"] for r in iter_records(with_bom)] == [r["answer"] for r in iter_records(v2_csv)]


def test_an_ordinal_beyond_the_needles_is_named_in_english(v2_data, tmp_path):
    source = v2_data / "2needle" / "mrcr_v2_2needle_in_(8192,16384).csv"

    def ask_for_the_third(records):
        record = records[0]
        for word in ("first", "second"):
            old = f"to the {word} "
            if old in record["view_ops"]:
                new_view_ops = record["view_ops"].replace(old, "to the third ")
                record["queries"] = record["queries"][: -len(record["view_ops"])] + new_view_ops
                record["view_ops"] = new_view_ops
                return
        raise AssertionError("no ordinal found")

    bad = tmp_path / "third.csv"
    rewrite(source, bad, ask_for_the_third)
    messages = [f.message for f in validate_v2_paths([bad]).report.findings if f.check == "ground_truth"]
    assert any("asks for the 3rd of 2 turns" in m for m in messages), messages


# --- the needle ask where it is no needle, empty needle writings (tokens not recounted: only the text changes)


def _edit_turn(record: dict, turn: int, ask: str | None = None, writing: str | None = None) -> None:
    """Rewrite one turn's ask and/or writing in `queries` (by its offset, so no other turn changes)."""
    from tests.support.v2_resolve import solve

    old_ask, old_writing, start = solve(record["queries"]).turns[turn]
    old = f"User: {old_ask}\n\nAssistant: {old_writing}\n\n"
    ask, writing = ask if ask is not None else old_ask, writing if writing is not None else old_writing
    new = f"User: {ask}\n\nAssistant: {writing}\n\n"
    assert record["queries"][start : start + len(old)] == old
    record["queries"] = record["queries"][:start] + new + record["queries"][start + len(old) :]


def _distractor_turn(record: dict) -> int:
    from tests.support.v2_resolve import solve

    solved = solve(record["queries"])
    return next(i for i in range(len(solved.turns)) if i not in solved.needle_turns)


def _needle_ask(record: dict) -> str:
    from tests.support.v2_resolve import solve

    return solve(record["queries"]).ask


def _lone(records: list[dict]) -> int:
    """A row whose key no other row asks about (the first): an edit makes its transcript another one,
    and a key asked about in two transcripts under one hash is a finding of its own (`hash_key`)."""
    hashes = Counter(r["answer"][:HASH_LENGTH] for r in records)
    return next(i for i, r in enumerate(records) if hashes[r["answer"][:HASH_LENGTH]] == 1)


def _near_duplicate_upper(records):
    record = records[_lone(records)]
    _edit_turn(record, _distractor_turn(record), ask=_needle_ask(record).upper())


def _near_duplicate_no_period(records):
    record = records[_lone(records)]
    _edit_turn(record, _distractor_turn(record), ask=_needle_ask(record).removesuffix("."))


def _near_duplicate_inner_comma(records):
    record = records[_lone(records)]
    _edit_turn(record, _distractor_turn(record), ask=_needle_ask(record).replace(" about ", ", about ", 1))


def _needle_ask_in_fewshot(records):
    marker = "======== EXAMPLE 1 ========\n\n"
    record = records[_lone(records)]
    extra = f"User: {_needle_ask(record)}\n\nAssistant: Glow.\n\n"
    record["queries"] = record["queries"].replace(marker, marker + extra, 1)


def _needle_ask_in_writing(records):
    from tests.support.v2_resolve import solve

    record = records[_lone(records)]
    turn = _distractor_turn(record)
    writing = solve(record["queries"]).turns[turn][1]
    _edit_turn(record, turn, writing=f"{writing}\n\nUser: {_needle_ask(record)}")


def _empty_target_writing(records):
    from tests.support.v2_resolve import solve

    record = records[_lone(records)]
    solved = solve(record["queries"])
    _edit_turn(record, solved.needle_turns[solved.ordinal - 1], writing="")
    record["answer"] = solved.hash


TEXT_MUTATIONS = {
    "loose_key_upper": (_near_duplicate_upper, {"needle_ask_elsewhere"}),
    "loose_key_no_period": (_near_duplicate_no_period, {"needle_ask_elsewhere"}),
    "near_duplicate_inner_comma": (_near_duplicate_inner_comma, {"near_duplicate_ask"}),
    "needle_ask_in_fewshot": (_needle_ask_in_fewshot, {"needle_ask_elsewhere"}),
    "needle_ask_in_writing": (_needle_ask_in_writing, {"needle_ask_elsewhere"}),
    "empty_target_writing": (_empty_target_writing, {"empty_writing"}),
}


@pytest.mark.parametrize("name", sorted(TEXT_MUTATIONS))
def test_each_ask_defect_is_caught_by_name(v2_csv, tmp_path, name):
    mutate, expected = TEXT_MUTATIONS[name]
    bad = tmp_path / "bad.csv"
    rewrite(v2_csv, bad, mutate)
    findings = validate_v2_paths([bad], tokens=False).report.findings
    assert {f.row for f in findings} == {_lone(list(iter_records(v2_csv)))}, findings
    assert {f.check for f in findings} == expected, [f.message for f in findings]
    severity = "warning" if expected == {"near_duplicate_ask"} else "error"
    assert {f.severity for f in findings} == {severity}


def test_ask_findings_say_where(v2_csv, tmp_path):
    bad = tmp_path / "bad.csv"
    rewrite(v2_csv, bad, _needle_ask_in_writing)
    records = list(iter_records(v2_csv))
    record = records[_lone(records)]
    turn = _distractor_turn(record)
    (finding,) = validate_v2_paths([bad], tokens=False).report.findings
    assert f"the writing of turn {turn}" in finding.message
    rewrite(v2_csv, bad, _empty_target_writing)
    (finding,) = validate_v2_paths([bad], tokens=False).report.findings
    assert "which the query asks for" in finding.message


def test_a_byte_that_is_not_utf8_is_named_by_row_and_turn(v2_csv, tmp_path):
    """A CSV byte that is not UTF-8 in a writing: a `text_encoding` error on each row holding it,
    naming the turn, and the other checks still run (it used to stop the file at that row)."""
    from tests.support.v2_resolve import solve

    records = list(iter_records(v2_csv))
    turn = _distractor_turn(records[0])
    writing = solve(records[0]["queries"]).turns[turn][1].encode()
    bad = tmp_path / "bad.csv"
    data = v2_csv.read_bytes()
    bad.write_bytes(data.replace(writing, writing[:5] + b"\xff" + writing[6:]))
    holding = {i for i, r in enumerate(records) if writing.decode() in r["queries"]}
    findings = validate_v2_paths([bad], tokens=False).report.findings
    assert {(f.row, f.check) for f in findings} == {(i, "text_encoding") for i in holding}
    assert all("holds the byte 0xFF, not UTF-8, at character" in f.message for f in findings)
    assert all(f"in turn {turn}" in f.message for f in findings if f.row == 0)
    counted = validate_v2_paths([bad]).report
    assert not counted.unreadable and {f.row for f in counted.findings} == holding


def test_a_lone_surrogate_in_a_record_is_reported_not_raised(v2_csv):
    from mrcr_gen.recipes.mrcr_v2._checks import V2FileState, check_v2_record

    record = coerce_record(next(iter_records(v2_csv)))
    head = "\n\nAssistant: "
    at = record["queries"].rindex(head, 0, len(record["queries"]) - len(record["view_ops"])) + len(head)
    record["queries"] = record["queries"][:at] + "\ud800" + record["queries"][at:]
    result = check_v2_record(record, V2FileState(file="x"), 0)
    assert "text_encoding" in {f.check for f in result.findings}
    assert result.n_tokens is not None  # the rest is still checked, tokens counted


def test_v2_goes_through_the_core_pipeline_with_provenance_from_its_sidecar(v2_csv, tmp_path):
    """A sidecar beside the CSV (one record per row: "bin", "n_tokens", "tokenizer", as generation
    writes it) is read by the same code as openai/mrcr's: a row whose recount leaves the bin it was
    generated for is a `token_bin` error, and --clean drops it."""
    from mrcr_gen._card import sidecar_path
    from mrcr_gen.recipes import recipe_named

    MRCR_V2 = recipe_named("mrcr-v2")
    from mrcr_gen.recipes.mrcr_v2._validate import SPEC
    from mrcr_gen.validate import validate_paths

    data = tmp_path / "data.csv"
    data.write_bytes(v2_csv.read_bytes())
    rows = [coerce_record(r) for r in iter_records(data)]
    labels = ["(8192, 16384]"] * len(rows)
    labels[2] = "(4096, 8192]"  # row 2 says it was made for the bucket below
    pairs = zip(labels, rows, strict=True)
    records = [{"bin": b, "n_tokens": r["context_len"], "tokenizer": "o200k_base"} for b, r in pairs]
    lines = [json.dumps(record) for record in records]
    sidecar_path(data).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    assert sidecar_path(data) == tmp_path / "data.samples.jsonl"

    assert MRCR_V2.checking() is SPEC
    report = validate_v2_paths([data]).report
    assert report == validate_paths([data], spec=SPEC)  # the thin wrapper is the pipeline
    (finding,) = report.findings
    assert (finding.row, finding.check) == (2, "token_bin")
    assert "says the sidecar" in finding.message and "queries recounts to" in finding.message

    out = tmp_path / "clean.parquet"
    result = validate_v2_paths([data], clean=out)
    assert (result.kept, result.dropped) == (len(rows) - 1, 1)
    assert result.changes == [f"{data}:2: dropped (token_bin)"]
    assert [r["answer"] for r in iter_records(out)] == [r["answer"] for i, r in enumerate(rows) if i != 2]


def test_v2_fix_is_refused_and_a_broken_file_is_not_written(v2_csv, tmp_path):
    from mrcr_gen.recipes import recipe_named

    MRCR_V2 = recipe_named("mrcr-v2")

    assert MRCR_V2.repair_refusal("fix") == "--fix does not apply to MRCR v2 files (column 'queries'); use --clean"
    broken = tmp_path / "broken.csv"
    broken.write_text("queries,answer\nq,a\n", encoding="utf-8")
    result = validate_v2_paths([broken], clean=tmp_path / "out.csv")
    assert not (tmp_path / "out.csv").exists() and result.files[0].output is None
    assert {f.check for f in result.report.findings} == {"schema"}
