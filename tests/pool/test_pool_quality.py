"""The pool quality report: flag rules on real-shaped replies, figures, duplicates, needle slots."""

from __future__ import annotations

import json

import pytest

from mrcr_gen import Ask, Assembler, AssemblyError
from mrcr_gen._api import pool_quality
from mrcr_gen.cli import gen_main
from mrcr_gen.pool import PoolWriter, PoolWriting, write_pool
from mrcr_gen.pool._flags import flag
from mrcr_gen.pool._quality import TokenFigures, quality_report, quality_report_path, write_quality_report
from tests.support import REAL_ROWS

# Written for these tests in the shapes chat models reply with (not copied from any dataset).
FLAGGED = {
    "I'm sorry, but I can't help with writing that.": ("refusal", "apology-then-cannot"),
    "I’m sorry, I am unable to create content about that topic.": ("refusal", "apology-then-cannot"),
    "I cannot write a poem that glorifies violence.": ("refusal", "cannot-help"),
    "As an AI language model, I do not have feelings about hats.": ("refusal", "as-an-ai"),
    "Certainly! Could you provide more context about what kind of ladders you mean?": ("meta", "asks-for-details"),
    "Sure, I can help you draft an email about pipes. Could you please share some details first?": (
        "meta",
        "asks-for-details",
    ),
    "Certainly! However, I'll need a bit more context to tailor the email to you.": ("meta", "needs-more-context"),
    "   \n\t ": ("empty", "empty"),
    "": ("empty", "empty"),
}
ANSWERS = [
    "Certainly! Here's a riddle about clocks:\n\nI have hands but never clap...",
    "Subject: Quarterly update\n\nDear team,\n\nCould you please provide more details on the budget by Friday?",
    "**Verse 1**\nSorry is the word I could not say,\nI cannot help but think of yesterday",
    "Dear Editor,\n\nI am writing to ask whether you can provide more context in your coverage of rivers.",
    "In the quiet town, nobody said sorry, and nobody could not help smiling.",
]


@pytest.mark.parametrize("text", list(FLAGGED))
def test_flagged_replies(text):
    assert flag(text) == FLAGGED[text]


@pytest.mark.parametrize("text", ANSWERS)
def test_answers_are_not_flagged(text):
    assert flag(text) is None


def writing(format_: str, entity: str, text: str, n_tokens: int = 10) -> PoolWriting:
    return PoolWriting.make(Ask(format=format_, entity=entity), text or " ", n_tokens, "test")


def test_report_counts_and_figures(tmp_path):
    writings = [writing("poem", f"e{i}", f"A poem number {i}.", n_tokens=10 * (i + 1)) for i in range(10)]
    writings += [
        writing("poem", "cats", "I'm sorry, but I can't write that."),
        writing("email", "pipes", "Certainly! Could you provide more context about the pipes?"),
        writing("email", "a", "Hello there, friend."),
        writing("email", "b", "Hello there, friend."),  # the same text for another ask: an exact duplicate
        writing("email", "c", "hello  THERE, friend."),  # equal up to case and spacing: a near duplicate
    ]
    report = quality_report(writings, tmp_path / "p.parquet", {"poem": TokenFigures.of([5, 6, 7])}, "ref")
    assert (report.writings, report.refusals, report.meta, report.empty) == (15, 1, 1, 0)
    assert (report.exact_duplicates, report.near_duplicates) == (1, 1)
    poem = next(q for q in report.formats if q.format == "poem")
    assert poem.tokens == TokenFigures(writings=11, median=50, p10=10, p90=90)
    assert poem.reference == TokenFigures(writings=3, median=6, p10=5, p90=7) and poem.flagged == 1
    email = next(q for q in report.formats if q.format == "email")
    assert email.reference is None and email.flagged == 1
    assert {f.rule for f in report.flagged} == {"apology-then-cannot", "asks-for-details"}
    assert len(report.duplicate_groups) == 1 and len(report.duplicate_groups[0]) == 3


def needle_pool() -> list[PoolWriting]:
    """'write a poem about cats': 3 writings and 2 flagged replies; other asks for distractors and the preamble."""
    pool = [writing("poem", "cats", f"Cats poem {i}: soft paws in the sun.", 12) for i in range(3)]
    pool += [
        writing("poem", "cats", "I'm sorry, but I can't write a poem about cats."),
        writing("poem", "cats", "Could you please specify which cats you would like the poem to be about?"),
    ]
    pool += [
        writing("riddle", f"thing {i}", f"Riddle {i} {j}: what has keys but no locks?", 14)
        for i in range(30)
        for j in range(2)
    ]
    return pool


def test_flagged_writings_never_fill_needle_slots():
    writer = PoolWriter(needle_pool())
    cats = Ask(format="poem", entity="cats")
    assert (writer.n_variants(cats), writer.needle_variants(cats)) == (5, 3)
    assert all(flag(w.text) is None for w in writer.writings([(cats, v) for v in range(3)]))
    assert all(flag(w.text) is not None for w in writer.writings([(cats, v) for v in (3, 4)]))
    assembler = Assembler(writer, date_added="01-01-2000")
    seen = set()
    for seed in range(12):
        sample = assembler.sample(n_needles=3, seed=seed, tokens=2000)
        if sample.format == "poem":
            messages = json.loads(sample.row.prompt)
            needles = [messages[i + 1]["content"] for i in sample.needle_indices]
            seen.update(needles)
            assert all(flag(text) is None for text in needles)
            assert flag(sample.row.answer[10:]) is None
    assert seen  # the cats ask was the needle ask at least once
    with pytest.raises(AssemblyError, match="refusals and replies about the ask left out"):
        assembler.sample(n_needles=4, seed=0, tokens=2000)


def test_build_and_harvest_write_the_report(tmp_path):
    path = write_pool(needle_pool(), tmp_path / "pool.parquet")
    report = write_quality_report(path, {"poem": (20, 10, 30)}, "declared")
    saved = json.loads(quality_report_path(path).read_text())
    assert saved["refusals"] == report.refusals == 1 and saved["meta"] == 1 and saved["reference"] == "declared"
    compared = write_quality_report(path, {}, "unused", compare=path)
    assert compared.reference == f"pool {path}"
    poem = next(q for q in compared.formats if q.format == "poem")
    assert poem.reference is not None and poem.reference.writings == 3  # the flagged ones are no reference


def test_quality_command(tmp_path, capsys):
    path = write_pool(needle_pool(), tmp_path / "pool.parquet")
    with pytest.raises(SystemExit) as exit_info:
        gen_main(["pool", "quality", str(path)])
    err = capsys.readouterr().err
    assert exit_info.value.code in (0, None), err
    assert "1 refusals, 1 talking about the ask" in err and quality_report_path(path).is_file()
    with pytest.raises(SystemExit) as exit_info:
        gen_main(["pool", "quality", str(path), "--compare", str(tmp_path / "missing.parquet")])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.count("\n") == 1


@pytest.mark.skipif(not REAL_ROWS.is_file(), reason="real openai/mrcr rows not available")
def test_official_rows(tmp_path):
    """GPT-4o's official writings hold replies that ask for context instead of writing: found, none of the rest."""
    from mrcr_gen._api import harvest

    harvest([REAL_ROWS], tmp_path / "real.parquet")
    report = pool_quality(tmp_path / "real.parquet")
    assert report.refusals == 0 and report.empty == 0 and 10 <= report.meta <= 40
    assert {item.kind for item in report.flagged} == {"meta"}
    assert {item.ask.split(" about ")[0] for item in report.flagged} <= {"write a email", "write a formal letter"}
    email = next(q for q in report.formats if q.format == "email")
    assert email.reference is not None and email.flagged >= 10
