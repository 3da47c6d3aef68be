"""`mrcr_gen.grade_responses` on an MRCR v2 file gives exactly what `mrcr-grade --json` prints:
the strict score, the lenient score, `context_len`, the floors and Google's summary numbers."""

from __future__ import annotations

import csv
import json
from difflib import SequenceMatcher
from pathlib import Path

import pytest

from mrcr_gen import grade_responses
from mrcr_gen._errors import RequestError
from mrcr_gen._tokens import count_tokens
from mrcr_gen.cli._grade import grade_main
from mrcr_gen.recipes.mrcr_v2._text import HEADER, TRANSCRIPT_OPEN, ask_text, query_text, turn_text

POEM, ESSAY = ask_text("poem", "flowers", "plain"), ask_text("essay", "tides", "plain")
TRANSCRIPT = (
    f"{HEADER}\n\n{TRANSCRIPT_OPEN}"
    + turn_text(POEM, "Roses are red.")
    + turn_text(ESSAY, "Tides turn twice a day.")
    + turn_text(POEM, "Violets are blue.")
)
HASHES = ("Ab3dEf6hIj9K", "Zy8xWv7uTs6R")
#: Row 0 asks for the second poem, row 1 for the first.
QUERIES = (query_text(HASHES[0], 2, "poem", "flowers", "plain"), query_text(HASHES[1], 1, "poem", "flowers", "plain"))


@pytest.fixture()
def tiny(tmp_path) -> Path:
    """Two rows of one transcript (the upstream CSV's columns that grading reads), two needles."""
    path = tmp_path / "tiny.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["queries", "answer", "view_ops", "num_relevant"])
        for hash_, view_ops, writing in zip(HASHES, QUERIES, ("Violets are blue.", "Roses are red."), strict=True):
            writer.writerow([TRANSCRIPT + view_ops, hash_ + writing, view_ops, 2])
    return path


def responses_file(folder: Path, replies: dict[int, str]) -> Path:
    path = folder / "responses.jsonl"
    path.write_text("".join(json.dumps({"row": row, "response": reply}) + "\n" for row, reply in replies.items()))
    return path


def cli(capsys, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    with pytest.raises(SystemExit) as done:
        grade_main(list(args))
    out, err = capsys.readouterr()
    return done.value.code or 0, out, err


#: Row 0 answered exactly; row 1 with chatter before the hash: 0 strict, 1 lenient.
REPLIES = {0: HASHES[0] + "Violets are blue.", 1: "Sure! " + HASHES[1] + "Roses are red."}


def ratio(a: str, b: str) -> float:
    return SequenceMatcher(a=a, b=b).ratio()


def test_the_library_pins_a_small_example_exactly(tiny):
    result = grade_responses(tiny, REPLIES)
    roses, violets, tides = "Roses are red.", "Violets are blue.", "Tides turn twice a day."
    # The floors: the reply `hash + needle` (the two poems), `hash + writing` (the three turns), averaged.
    rows = [
        {"row": 0, "score": 1.0, "score_lenient": 1.0, "context_len": 115}
        | {"floor_random_needle": (ratio(violets, roses) + 1) / 2}
        | {"floor_random_writing": (ratio(violets, roses) + ratio(violets, tides) + 1) / 3},
        {"row": 1, "score": 0.0, "score_lenient": 1.0, "context_len": 116}
        | {"floor_random_needle": (1 + ratio(roses, violets)) / 2}
        | {"floor_random_writing": (1 + ratio(roses, tides) + ratio(roses, violets)) / 3},
    ]
    assert len(result["rows"]) == 2
    for got, expected in zip(result["rows"], rows, strict=True):
        assert got == pytest.approx(expected | {"bin": "(2048, 4096]", "n_needles": 2})
    assert [row["context_len"] for row in result["rows"]] == [count_tokens(TRANSCRIPT + q) for q in QUERIES]
    assert {k: v for k, v in result.items() if k not in ("rows", "report")} == {
        "recipe": "mrcr-v2",
        "mean": 0.5,
        "n_rows": 2,
        "missing": [],
        "cells": [{"bin": "(2048, 4096]", "n_needles": 2, "count": 2, "mean": 0.5}],
    }
    (needles,) = result["report"]["by_needles"]
    floors = [row["floor_random_needle"] for row in result["rows"]], [r["floor_random_writing"] for r in result["rows"]]
    assert {k: v for k, v in needles.items() if k != "buckets"} == pytest.approx(
        {
            "n_needles": 2,
            "count": 2,
            "skipped": 0,
            "mean_score": 0.5,
            "up_to_128k": 0.5,
            "up_to_128k_count": 2,
            "at_1m": None,
            "at_1m_count": 0,
            "auc_128k": None,
            "auc_1m": None,
            "floor_random_needle": sum(floors[0]) / 2,
            "floor_random_writing": sum(floors[1]) / 2,
        }
    )
    (bucket,) = needles["buckets"]
    assert (bucket["bucket"], bucket["count"], bucket["mean_score"], bucket["mean_score_lenient"]) == (
        "(2048, 4096]",
        2,
        0.5,
        1.0,
    )


@pytest.mark.parametrize("as_dict", [False, True], ids=["file", "dict"])
@pytest.mark.parametrize("options", [[], ["--no-cache"], ["--allow-missing"]])
def test_the_library_gives_what_the_cli_prints(tiny, v2_csv, tmp_path, capsys, options, as_dict):
    for path, replies in ((tiny, REPLIES), (v2_csv, _replies_of(v2_csv))):
        if "--allow-missing" in options:
            replies = {row: reply for row, reply in replies.items() if row % 2}
        responses = responses_file(tmp_path, replies)
        code, out, err = cli(capsys, str(path), str(responses), "--json", *options)
        assert code == 0, err
        printed = json.loads(out)
        result = grade_responses(
            path,
            replies if as_dict else responses,
            cache="--no-cache" not in options,
            allow_missing="--allow-missing" in options,
        )
        assert result == printed
        assert {"score_lenient", "context_len"} <= printed["rows"][0].keys() and "report" in printed


def _replies_of(path: Path) -> dict[int, str]:
    """Each row's answer, every third with chatter before it (strict 0, lenient 1), every third cut short."""
    with path.open(newline="", encoding="utf-8") as handle:
        answers = [record["answer"] for record in csv.DictReader(handle)]
    return {
        row: ("Here: " + answer if row % 3 == 1 else answer[: len(answer) // 2] if row % 3 == 2 else answer)
        for row, answer in enumerate(answers)
    }


@pytest.mark.parametrize(
    ("replies", "message"),
    [
        ({0: "x"}, "1 rows have no response (first: [1]); use --allow-missing to grade a subset"),
        ({0: "x", 1: "y", 5: "z"}, "responses name rows the data file lacks: [5]"),
    ],
)
def test_the_library_refuses_what_the_cli_refuses_in_the_same_words(tiny, tmp_path, capsys, replies, message):
    responses = responses_file(tmp_path, replies)
    code, _, err = cli(capsys, str(tiny), str(responses))
    assert code == 2 and err.strip() == f"mrcr-grade: error: {message}"
    with pytest.raises(RequestError) as refused:
        grade_responses(tiny, responses)
    assert str(refused.value) == message
