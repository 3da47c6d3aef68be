"""Row checks: valid rows are clean, each injected defect is reported under its own check."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcr_gen import Finding, normalize_ask, validate_row
from mrcr_gen.recipes.openai_mrcr._checks import check_row
from tests.support.rowkit import (
    MUTATIONS,
    make_row,
    messages_of,
    needles_of,
    with_messages,
)


@given(seed=st.integers(0, 10_000), n_needles=st.integers(1, 6), extra_pairs=st.integers(0, 8))
@settings(max_examples=60, deadline=None)
def test_hand_built_rows_are_clean(seed: int, n_needles: int, extra_pairs: int) -> None:
    row = make_row(seed, n_needles=n_needles, pairs=n_needles + 2 + extra_pairs)
    assert validate_row(row, count_tokens=False) == []


@pytest.mark.parametrize("name", sorted(MUTATIONS))
@pytest.mark.parametrize("seed", [0, 1, 7])
def test_each_mutation_reports_its_check(name: str, seed: int) -> None:
    mutate, expected = MUTATIONS[name]
    row = make_row(seed, n_needles=3)
    findings = validate_row(mutate(row), file="f.parquet", row=5, count_tokens=False)
    assert {f.check for f in findings} == expected, [f.message for f in findings]
    assert all(isinstance(f, Finding) and f.row == 5 and f.file == "f.parquet" for f in findings)
    assert all(f.message for f in findings)


def test_needle_count_says_too_many_and_lists_indices() -> None:
    row = MUTATIONS["extra_needle"][0](make_row(3, n_needles=2))
    (finding,) = validate_row(row, count_tokens=False)
    assert finding.severity == "error"
    assert "too many" in finding.message
    for index in needles_of(row):
        assert str(index) in finding.message


def test_needle_count_too_few() -> None:
    row = MUTATIONS["too_few_needles"][0](make_row(3, n_needles=2))
    (finding,) = validate_row(row, count_tokens=False)
    assert "too few" in finding.message


def test_ground_truth_names_the_needle_the_answer_came_from() -> None:
    row = make_row(11, n_needles=3, k=3)
    needles = needles_of(row)
    messages = messages_of(row)
    bad = {**row, "answer": row["random_string_to_prepend"] + messages[needles[0] + 1]["content"]}
    (finding,) = validate_row(bad, count_tokens=False)
    assert finding.check == "ground_truth"
    assert f"messages[{needles[2] + 1}]" in finding.message  # expected
    assert f"messages[{needles[0] + 1}], the response to needle 1 of 3" in finding.message  # found


def test_ground_truth_names_a_distractor() -> None:
    row = MUTATIONS["answer_distractor"][0](make_row(4))
    (finding,) = validate_row(row, count_tokens=False)
    assert "distractor" in finding.message


def test_ground_truth_answer_matching_nothing() -> None:
    row = make_row(4)
    (finding,) = validate_row({**row, "answer": row["answer"] + " extra"}, count_tokens=False)
    assert finding.check == "ground_truth" and "matches no message" in finding.message


def test_prefix_removed_is_not_also_a_ground_truth_error() -> None:
    row = MUTATIONS["prefix_removed"][0](make_row(2))
    assert [f.check for f in validate_row(row, count_tokens=False)] == ["answer_prefix"]


def test_prefix_removed_and_wrong_body_is_both() -> None:
    row = MUTATIONS["answer_other_needle"][0](make_row(2))
    row = {**row, "answer": row["answer"][10:]}
    assert {f.check for f in validate_row(row, count_tokens=False)} == {"answer_prefix", "ground_truth"}


def test_desired_index_other_needle_says_expected() -> None:
    row = make_row(5, n_needles=3, k=1)
    needles = needles_of(row)
    (finding,) = validate_row({**row, "desired_msg_index": needles[2]}, count_tokens=False)
    assert f"expected {needles[0]}" in finding.message and "3rd" in finding.message


def test_ordinal_beyond_needles() -> None:
    row = make_row(5, n_needles=2, k=2)
    messages = messages_of(row)
    messages[-1]["content"] = messages[-1]["content"].replace("2nd", "3rd")
    row = {**row, "prompt": json.dumps(messages)}
    checks = {f.check for f in validate_row(row, count_tokens=False)}
    assert checks == {"desired_index"}


def test_near_duplicate_is_a_warning_only() -> None:
    row = MUTATIONS["near_duplicate"][0](make_row(9))
    (finding,) = validate_row(row, count_tokens=False)
    assert finding.severity == "warning"
    assert not check_row(row, count_tokens=False).has_error


def test_normalize_ask() -> None:
    assert normalize_ask("Write a  poem, about Lanterns!") == normalize_ask("write a poem about lanterns")
    assert normalize_ask("write a poem about lantern") != normalize_ask("write a poem about lanterns")
    # Whitespace is ignored entirely, as in the generator's guarantee: one key serves both.
    assert normalize_ask("write a poem about ice cream") == normalize_ask("write a poem about icecream")


def test_tiny_row_is_out_of_every_bin() -> None:
    result = check_row(make_row(1), count_tokens=True)
    assert [f.check for f in result.findings] == ["token_bin"]
    assert result.bin == "out of range" and 0 < result.n_tokens < 4096


def test_long_enough_row_lands_in_the_first_bin() -> None:
    result = check_row(make_row(1, pairs=12, filler=400), count_tokens=True)
    assert result.findings == ()
    assert result.bin == "[4096, 8192]"


def test_token_count_is_messages_plus_answer() -> None:
    from mrcr_gen import count_tokens

    row = make_row(1, pairs=12, filler=400)
    expected = sum(count_tokens(m["content"]) for m in messages_of(row)) + count_tokens(row["answer"])
    assert check_row(row).n_tokens == expected


def test_missing_column_in_a_dict_row() -> None:
    row = make_row(1)
    del row["n_chars"]
    assert {f.check for f in validate_row(row, count_tokens=False)} == {"schema"}


def test_garbage_never_raises() -> None:
    for record in ({}, {"prompt": "[]"}, {"prompt": "[1, 2]"}, {"prompt": "null", "answer": 3}, {"prompt": '[{"role": "user"}]'}):
        findings = validate_row(record, count_tokens=True)
        assert findings and all(f.is_error for f in findings if f.check == "schema")


def test_structure_names_the_first_message_out_of_place() -> None:
    row = make_row(2, n_needles=3)
    distractor = next(i for i in range(1, row["total_messages"] - 1, 2) if i not in needles_of(row))
    (swapped,) = validate_row(MUTATIONS["swapped_roles"][0](row), count_tokens=False)
    assert swapped.severity == "error"
    assert f"messages[{distractor}] is 'assistant', expected user (out of place: [{distractor}, {distractor + 1}])" in swapped.message
    (deleted,) = validate_row(MUTATIONS["deleted_writing"][0](row), count_tokens=False)
    assert f"messages[{distractor + 1}] is 'user', expected assistant" in deleted.message
    (system,) = validate_row(MUTATIONS["system_message"][0](row), count_tokens=False)
    assert "messages[0] is 'system'" in system.message and "few-shot preamble" in system.message
    (removed,) = validate_row(MUTATIONS["preamble_removed"][0](row), count_tokens=False)
    assert removed.message.startswith("messages[0] must be the user few-shot preamble")


def test_structure_finds_a_last_ask_without_its_writing() -> None:
    row = next(r for r in map(make_row, range(50)) if r["total_messages"] - 3 not in needles_of(r))
    messages = messages_of(row)
    last_ask = len(messages) - 3
    del messages[last_ask + 1]
    (finding,) = validate_row(with_messages(row, messages), count_tokens=False)
    assert finding.check == "structure"
    assert f"messages[{last_ask}] is a user ask with no assistant writing" in finding.message


def test_ask_form_only_for_distractor_asks() -> None:
    row = make_row(6, n_needles=2)
    messages = messages_of(row)
    i = next(i for i in range(1, len(messages) - 1, 2) if i not in needles_of(row))
    for bad in ("write a  poem about ink", "Write a poem about ink", "write a poem about ", "write a poem on ink"):
        messages[i] = {"role": "user", "content": bad}
        row = {**row, "prompt": json.dumps(messages), "n_chars": sum(len(m["content"]) for m in messages)}
        (finding,) = validate_row(row, count_tokens=False)
        assert (finding.check, finding.severity) == ("ask_form", "warning")
        assert f"{i}: {bad!r}" in finding.message


def test_near_duplicate_needle_response_ignores_case_and_whitespace_but_not_words() -> None:
    row = make_row(8, n_needles=3, k=2)  # the pair changed below leaves the target alone
    messages, needles = messages_of(row), needles_of(row)
    first = messages[needles[0] + 1]["content"]
    for variant, expected in ((first.upper(), {"near_duplicate_needle_response"}), (f" {first}\t", {"near_duplicate_needle_response"}), (first + " more", set())):
        changed = [dict(m) for m in messages]
        changed[needles[2] + 1]["content"] = variant
        target = row["desired_msg_index"]
        mutated = {
            **row,
            "prompt": json.dumps(changed),
            "n_chars": sum(len(m["content"]) for m in changed),
            "answer": row["random_string_to_prepend"] + changed[target + 1]["content"],
        }
        assert {f.check for f in validate_row(mutated, count_tokens=False)} == expected


@pytest.mark.parametrize("name", ["near_duplicate", "malformed_ask", "whitespace_needle_response"])
def test_strict_makes_warnings_errors(name: str) -> None:
    row = MUTATIONS[name][0](make_row(3, n_needles=3))
    assert not check_row(row, count_tokens=False).has_error
    strict = check_row(row, count_tokens=False, strict=True)
    assert strict.has_error and [f.check for f in strict.findings] == list(MUTATIONS[name][1])
    assert all(f.severity == "error" for f in validate_row(row, count_tokens=False, strict=True))


def test_odd_roles_are_structure_errors_not_crashes() -> None:
    row = make_row(5)
    for role in (5, None, ["user"], {"k": "v"}, "system", "tool"):
        messages = messages_of(row)
        messages[0] = {"role": role, "content": messages[0]["content"]}
        findings = validate_row({**row, "prompt": json.dumps(messages)}, count_tokens=False)
        assert [(f.check, f.severity) for f in findings] == [("structure", "error")], findings
        assert f"messages[0] is {str(role)!r}" in findings[0].message


def test_needle_ask_elsewhere_names_where_it_stands() -> None:
    row = make_row(5)
    preamble = MUTATIONS["needle_ask_in_preamble"][0](row)
    (finding,) = validate_row(preamble, count_tokens=False)
    assert finding.severity == "error" and "messages[0] (the preamble's worked examples)" in finding.message
    writing = MUTATIONS["needle_ask_in_writing"][0](row)
    (finding,) = validate_row(writing, count_tokens=False)
    distractor = next(i for i in range(1, row["total_messages"] - 1, 2) if i not in needles_of(row))
    assert f"messages[{distractor + 1}] (a writing)" in finding.message


@pytest.mark.parametrize(
    "addition",
    [
        "\n\nUSER: Write a poem about lanterns.",  # any case, a speaker label, final punctuation
        "\n**write a poem, about lanterns**",
        "\nwrite a poem about lanterns\nAssistant: A second poem.",
    ],
)
def test_needle_ask_as_a_line_of_a_writing_is_an_error(addition: str) -> None:
    row = make_row(2)
    messages = messages_of(row)
    target = row["desired_msg_index"] + 1
    messages[target]["content"] += addition  # the needle's own writing too
    fixed = {**with_messages(row, messages), "answer": row["random_string_to_prepend"] + messages[target]["content"]}
    assert [f.check for f in validate_row(fixed, count_tokens=False)] == ["needle_ask_elsewhere"]


@pytest.mark.parametrize(
    "addition",
    [
        " I could write a poem about lanterns, she said.",  # a phrase in a sentence, not an ask
        "\nwrite a poem about lanterns and glaciers",  # another ask
        "\nwrite a poem\nabout lanterns",  # across lines
        "\nwrite a short poem about lanterns",
    ],
)
def test_the_needle_phrase_inside_a_sentence_is_no_ask(addition: str) -> None:
    row = make_row(2)
    messages = messages_of(row)
    i = next(i for i in range(1, row["total_messages"] - 1, 2) if i not in needles_of(row)) + 1
    messages[i]["content"] += addition
    assert validate_row(with_messages(row, messages), count_tokens=False) == []


def test_empty_target_writing_is_an_error_naming_it() -> None:
    row = make_row(6, n_needles=3, k=2)
    (finding,) = validate_row(MUTATIONS["empty_target_writing"][0](row), count_tokens=False)
    target = row["desired_msg_index"] + 1
    assert finding.check == "empty_writing" and finding.severity == "error"
    assert f"messages[{target}] (needle 2 of 3, the one the query asks for)" in finding.message


def test_a_lone_surrogate_is_named_and_the_row_still_counted() -> None:
    row = make_row(1, pairs=12, filler=400)
    bad = MUTATIONS["lone_surrogate"][0](row)
    result = check_row(bad, count_tokens=True)
    (finding,) = result.findings
    i = next(i for i in range(1, row["total_messages"] - 1, 2) if i not in needles_of(row)) + 1
    assert finding.check == "text_encoding" and f"messages[{i}] at character" in finding.message
    assert "U+D800" in finding.message
    assert result.bin == "[4096, 8192]" and result.n_tokens is not None
    # The rest of the row is still checked: a second defect is reported beside it.
    both = MUTATIONS["answer_distractor"][0](bad)
    assert {f.check for f in check_row(both, count_tokens=True).findings} == {"text_encoding", "ground_truth"}


def test_a_null_answer_claims_no_token_count() -> None:
    result = check_row(MUTATIONS["null_value"][0](make_row(1, pairs=12, filler=400)), count_tokens=True)
    assert [f.check for f in result.findings] == ["schema"]
    assert result.n_tokens is None and result.bin is None
