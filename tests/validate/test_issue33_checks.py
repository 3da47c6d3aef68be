"""Issue 33's checks on openai/mrcr rows: a distractor ask that is the needle ask but for case,
whitespace or trailing punctuation; duplicate rows and prompts; needle writings as good as the target."""

from __future__ import annotations

import string
from pathlib import Path

import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcr_gen.recipes.openai_mrcr._checks import validate_row
from mrcr_gen.recipes.openai_mrcr._validate import SPEC, repair
from mrcr_gen.validate import validate_paths
from tests.support.rowkit import make_row, messages_of, needles_of, with_messages, write_rows


def _with_distractor_ask(row: dict, ask: str) -> dict:
    messages, needles = messages_of(row), needles_of(row)
    i = next(i for i in range(1, len(messages) - 1, 2) if i not in needles)
    messages[i] = {"role": "user", "content": ask}
    return with_messages(row, messages)


@settings(max_examples=60, deadline=None)
@given(
    cases=st.lists(st.booleans(), min_size=27, max_size=27),
    spaces=st.lists(st.sampled_from([" ", "  ", "\t", " \n "]), min_size=4, max_size=4),
    tail=st.text(alphabet=string.punctuation + " ", max_size=3),
)
def test_the_needle_ask_but_for_case_space_or_trailing_punctuation_is_an_error(cases, spaces, tail) -> None:
    words = ["write", "a", "poem", "about", "lanterns"]
    ask = "".join(w + s for w, s in zip(words, [*spaces, ""], strict=True)) + tail
    ask = "".join(c.upper() if up else c for c, up in zip(ask, cases + [False] * len(ask), strict=False))
    if ask == "write a poem about lanterns":
        return  # that is one more needle: needle_count's
    findings = validate_row(_with_distractor_ask(make_row(4), ask), count_tokens=False)
    assert [(f.check, f.severity) for f in findings] == [("needle_ask_elsewhere", "error")], findings
    assert "but for case or punctuation" in findings[0].message


def test_other_punctuation_stays_a_warning() -> None:
    findings = validate_row(_with_distractor_ask(make_row(4), "write a poem, about lanterns"), count_tokens=False)
    assert [(f.check, f.severity) for f in findings] == [("near_duplicate_ask", "warning")]


def test_clean_and_fix_drop_a_look_alike_ask(tmp_path: Path) -> None:
    rows = [make_row(s) for s in range(3)]
    rows[1] = _with_distractor_ask(rows[1], "Write a poem about lanterns.")
    path = write_rows(tmp_path / "in.parquet", rows)
    for mode in ("clean", "fix"):
        result = repair([path], tmp_path / f"{mode}.parquet", mode=mode, tokens=False)
        assert (result.kept, result.fixed, result.dropped) == (2, 0, 1)
        assert any("in.parquet:1: dropped (needle_ask_elsewhere)" in line for line in result.changes)


def _ambiguous(row: dict, change) -> dict:
    """The row with a needle other than the target rewritten from the target's writing."""
    messages, needles = messages_of(row), needles_of(row)
    target = row["desired_msg_index"]
    other = next(i for i in needles if i != target)
    messages[other + 1] = {"role": "assistant", "content": change(messages[target + 1]["content"])}
    return with_messages(row, messages)


def test_a_needle_as_good_as_the_target_is_an_error() -> None:
    row = _ambiguous(make_row(6, n_needles=3, filler=40), lambda text: text + "!")
    findings = validate_row(row, count_tokens=False)
    assert [(f.check, f.severity) for f in findings] == [("ambiguous_needle_response", "error")]
    assert "scores 0.99" in findings[0].message
    far = _ambiguous(make_row(6, n_needles=3, filler=40), lambda text: text[: len(text) // 2])
    assert validate_row(far, count_tokens=False) == []  # half the target scores 0.67


def test_duplicate_rows_and_prompts(tmp_path: Path) -> None:
    a, b = make_row(1), make_row(2)
    first = write_rows(tmp_path / "a.parquet", [a, b, a])
    second = write_rows(tmp_path / "b.parquet", [{**b, "date_added": "05-01-2025"}, make_row(3)])
    report = validate_paths([first, second], spec=SPEC, tokens=False)
    found = [(Path(f.file).name, f.row, f.check, f.severity) for f in report.findings]
    assert found == [("a.parquet", 2, "duplicate_row", "error"), ("b.parquet", 0, "duplicate_prompt", "warning")]
    assert "row 1 of " in report.findings[1].message and report.exit_code == 1
    result = repair([first, second], tmp_path / "out", mode="clean", tokens=False)
    assert pq.read_table(tmp_path / "out" / "a.parquet").num_rows == 2
    assert pq.read_table(tmp_path / "out" / "b.parquet").num_rows == 2 and result.dropped == 1
    strict = repair([first, second], tmp_path / "strict", mode="clean", tokens=False, strict=True)
    assert pq.read_table(tmp_path / "strict" / "b.parquet").num_rows == 1 and strict.dropped == 2


def test_a_prompt_twice_in_one_file_is_an_error(tmp_path: Path) -> None:
    a = make_row(1)
    path = write_rows(tmp_path / "a.parquet", [a, {**a, "date_added": "05-01-2025"}])
    (finding,) = validate_paths([path], spec=SPEC, tokens=False).findings
    assert (finding.row, finding.check, finding.severity) == (1, "duplicate_prompt", "error")
    assert "row 0 of this file" in finding.message


def test_fix_says_fixed_only_for_a_row_it_changed(tmp_path: Path) -> None:
    import json

    from mrcr_gen._card import sidecar_path
    from tests.support.rowkit import MUTATIONS

    rows = [make_row(s, filler=400) for s in range(3)]
    rows[2] = MUTATIONS["answer_distractor"][0](rows[2])  # fixable from the prompt
    path = write_rows(tmp_path / "in.parquet", rows)
    wrong_bin = {"bin": "(8192, 16384]", "n_tokens": 9000, "n_needles": 3, "tokenizer": "o200k_base"}
    right_bin = {**wrong_bin, "bin": "[4096, 8192]", "n_tokens": 5000}
    records = [wrong_bin, right_bin, right_bin]
    sidecar_path(path).write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    result = repair([path], tmp_path / "out.parquet", mode="fix", workers=1)
    assert (result.kept, result.fixed, result.dropped) == (1, 1, 1)
    assert result.changes[0] == f"{path}:0: dropped (token_bin)"  # nothing a fix could change
    assert result.changes[1].startswith(f"{path}:2: fixed: answer <- random string + messages[")
    assert all(not line.endswith("fixed: ") for line in result.changes)


def test_fix_never_keeps_a_duplicate(tmp_path: Path) -> None:
    from tests.support.rowkit import MUTATIONS

    broken = MUTATIONS["answer_distractor"][0](make_row(5))  # fixable on its own
    path = write_rows(tmp_path / "in.parquet", [make_row(4), broken, broken])
    result = repair([path], tmp_path / "out.parquet", mode="fix", tokens=False)
    assert (result.kept, result.fixed, result.dropped) == (1, 1, 1)
    assert result.changes[-1] == f"{path}:2: dropped (duplicate_row, ground_truth)"
