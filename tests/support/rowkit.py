"""Small valid MRCR rows built by hand (no generator), and mutations that each inject one defect."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from mrcr_gen import MRCR_SCHEMA, ordinal

FORMATS = ("poem", "riddle", "short essay", "formal letter", "song")
ENTITIES = ("lanterns", "glaciers", "the orchestra", "tomorrow", "ferns", "harbors", "ink")
ALPHANUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def make_row(
    seed: int = 0,
    n_needles: int = 3,
    k: int | None = None,
    pairs: int = 12,
    filler: int = 0,
    slots: Sequence[int] | None = None,
) -> dict:
    """A valid row: preamble, `pairs` ask/writing pairs of which `n_needles` are the needle (at the
    pairs `slots`, else drawn uniformly), the query for the k-th needle. `filler` extra words per
    writing make rows long enough for a bin."""
    rng = random.Random(seed)
    fmt, entity = "poem", "lanterns"
    needle_ask = f"write a {fmt} about {entity}"
    k = k if k is not None else rng.randint(1, n_needles)
    rs = "".join(rng.choice(ALPHANUM) for _ in range(10))
    slots = sorted(slots) if slots is not None else sorted(rng.sample(range(pairs), n_needles))
    messages = [
        {
            "role": "user",
            "content": "Here are some examples of conversations succeeded by a follow-up question answered "
            "correctly:\n\n======EXAMPLE======\nUser: write a riddle about ink\nAssistant: What runs but "
            "never walks?\nUser: Prepend Zz9Yy8Xx7W to the 1st (1 indexed) riddle about ink. Do not include "
            "any other text in your response.\nAssistant: Zz9Yy8Xx7WWhat runs but never walks?\n"
            "======END EXAMPLE======",
        }
    ]
    words = ["amber", "quiet", "river", "stone", "window", "lantern", "morning", "harbor", "ember", "meadow"]
    for j in range(pairs):
        if j in slots:
            ask = needle_ask
        else:
            while True:
                ask = f"write a {rng.choice(FORMATS)} about {rng.choice(ENTITIES)}"
                if ask != needle_ask:
                    break
        body = " ".join(rng.choice(words) for _ in range(8 + filler))
        messages.append({"role": "user", "content": ask})
        messages.append({"role": "assistant", "content": f"Piece {j} ({ask[8:]}): {body}."})
    messages.append(
        {
            "role": "user",
            "content": f"Prepend {rs} to the {ordinal(k)} (1 indexed) {fmt} about {entity}. "
            "Do not include any other text in your response.",
        }
    )
    needles = [1 + 2 * j for j in slots]
    target = needles[k - 1]
    return {
        "prompt": json.dumps(messages),
        "answer": rs + messages[target + 1]["content"],
        "random_string_to_prepend": rs,
        "n_needles": n_needles,
        "desired_msg_index": target,
        "total_messages": len(messages),
        "n_chars": sum(len(m["content"]) for m in messages),
        "date_added": "04-12-2025",
    }


# --- helpers for mutations ----------------------------------------------------------------------


def messages_of(row: dict) -> list[dict]:
    return json.loads(row["prompt"])


def needles_of(row: dict) -> list[int]:
    messages = messages_of(row)
    return [i for i, m in enumerate(messages[:-1]) if m["role"] == "user" and m["content"] == "write a poem about lanterns"]


def with_messages(row: dict, messages: list[dict]) -> dict:
    """The row with a new prompt and the counts that follow from it (so only the intended defect remains)."""
    return {
        **row,
        "prompt": json.dumps(messages),
        "total_messages": len(messages),
        "n_chars": sum(len(m["content"]) for m in messages),
    }


def extra_needle(row: dict) -> dict:
    messages = messages_of(row)
    extra = [{"role": "user", "content": "write a poem about lanterns"}, {"role": "assistant", "content": "A brand new poem."}]
    return with_messages(row, messages[:-1] + extra + messages[-1:])


def answer_other_needle(row: dict) -> dict:
    messages, needles = messages_of(row), needles_of(row)
    other = next(i for i in needles if i != row["desired_msg_index"])
    return {**row, "answer": row["random_string_to_prepend"] + messages[other + 1]["content"]}


def answer_distractor(row: dict) -> dict:
    messages, needles = messages_of(row), needles_of(row)
    distractor = next(i for i in range(1, len(messages) - 1, 2) if i not in needles)
    return {**row, "answer": row["random_string_to_prepend"] + messages[distractor + 1]["content"]}


def index_other_needle(row: dict) -> dict:
    other = next(i for i in needles_of(row) if i != row["desired_msg_index"])
    return {**row, "desired_msg_index": other}


def index_distractor(row: dict) -> dict:
    needles = needles_of(row)
    return {**row, "desired_msg_index": next(i for i in range(1, row["total_messages"] - 1, 2) if i not in needles)}


def index_out_of_range(row: dict) -> dict:
    return {**row, "desired_msg_index": row["total_messages"] + 5}


def prefix_removed(row: dict) -> dict:
    return {**row, "answer": row["answer"][len(row["random_string_to_prepend"]) :]}


def total_messages_off(row: dict) -> dict:
    return {**row, "total_messages": row["total_messages"] + 2}


def n_chars_off(row: dict) -> dict:
    return {**row, "n_chars": row["n_chars"] - 1}


def broken_json(row: dict) -> dict:
    return {**row, "prompt": row["prompt"][:-3]}


def not_a_message_list(row: dict) -> dict:
    return {**row, "prompt": json.dumps({"role": "user", "content": "hi"})}


def _distractor(row: dict) -> int:
    """The index of the first distractor ask."""
    needles = needles_of(row)
    return next(i for i in range(1, row["total_messages"] - 1, 2) if i not in needles)


def unknown_role(row: dict) -> dict:
    messages = messages_of(row)
    i = _distractor(row) + 1
    messages[i] = {"role": "narrator", "content": messages[i]["content"]}
    return {**row, "prompt": json.dumps(messages)}


def system_message(row: dict) -> dict:
    messages = [{"role": "system", "content": "You are a helpful assistant."}, *messages_of(row)]
    return {**with_messages(row, messages), "desired_msg_index": row["desired_msg_index"] + 1}


def preamble_removed(row: dict) -> dict:
    return {**with_messages(row, messages_of(row)[1:]), "desired_msg_index": row["desired_msg_index"] - 1}


def swapped_roles(row: dict) -> dict:
    messages, i = messages_of(row), _distractor(row)
    messages[i], messages[i + 1] = {**messages[i], "role": "assistant"}, {**messages[i + 1], "role": "user"}
    return with_messages(row, messages)


def deleted_writing(row: dict) -> dict:
    messages, i = messages_of(row), _distractor(row)
    del messages[i + 1]
    target = row["desired_msg_index"]
    return {**with_messages(row, messages), "desired_msg_index": target - 1 if target > i else target}


def whitespace_needle_response(row: dict) -> dict:
    """A needle's writing becomes another's with its spaces doubled and a newline added (two needles
    besides the target: as good as the target, it would be `ambiguous_needle_response`)."""
    messages, needles = messages_of(row), needles_of(row)
    a, b = [i for i in needles if i != row["desired_msg_index"]][:2]
    messages[b + 1] = {"role": "assistant", "content": messages[a + 1]["content"].replace(" ", "  ") + "\n"}
    target = row["desired_msg_index"]
    return {**with_messages(row, messages), "answer": row["random_string_to_prepend"] + messages[target + 1]["content"]}


def malformed_ask(row: dict) -> dict:
    messages, i = messages_of(row), _distractor(row)
    messages[i] = {"role": "user", "content": "please write a poem on glaciers"}
    return with_messages(row, messages)


def query_garbled(row: dict) -> dict:
    messages = messages_of(row)
    messages[-1] = {"role": "user", "content": "Please repeat the poem about lanterns."}
    return with_messages(row, messages)


def random_string_mismatch(row: dict) -> dict:
    new = "Q" + row["random_string_to_prepend"][1:] if row["random_string_to_prepend"][0] != "Q" else "R" + row["random_string_to_prepend"][1:]
    body = row["answer"][len(row["random_string_to_prepend"]) :]
    return {**row, "random_string_to_prepend": new, "answer": new + body}


def random_string_elsewhere(row: dict) -> dict:
    messages, needles = messages_of(row), needles_of(row)
    i = next(i for i in range(1, len(messages) - 1, 2) if i not in needles) + 1
    messages[i] = {"role": "assistant", "content": messages[i]["content"] + " " + row["random_string_to_prepend"]}
    return with_messages(row, messages)


def random_string_bad_pattern(row: dict) -> dict:
    old, new = row["random_string_to_prepend"], "abc-12"
    messages = messages_of(row)
    messages[-1] = {"role": "user", "content": messages[-1]["content"].replace(old, new)}
    return {**with_messages(row, messages), "random_string_to_prepend": new, "answer": new + row["answer"][len(old) :]}


def too_few_needles(row: dict) -> dict:
    return {**row, "n_needles": row["n_needles"] + 1}


def near_duplicate(row: dict) -> dict:
    messages, needles = messages_of(row), needles_of(row)
    i = next(i for i in range(1, len(messages) - 1, 2) if i not in needles)
    messages[i] = {"role": "user", "content": "write a poem: about lanterns"}
    return with_messages(row, messages)


def loose_needle_ask(row: dict) -> dict:
    """A distractor ask that is the needle ask but for case, whitespace and trailing punctuation."""
    messages, needles = messages_of(row), needles_of(row)
    i = next(i for i in range(1, len(messages) - 1, 2) if i not in needles)
    messages[i] = {"role": "user", "content": "Write a  poem about Lanterns."}
    return with_messages(row, messages)


def needle_ask_in_preamble(row: dict) -> dict:
    """A worked example of the preamble asks the needle ask too."""
    messages = messages_of(row)
    example = "User: write a riddle about ink\n"
    extra = "User: write a poem about lanterns\nAssistant: Glow.\n"
    messages[0] = {"role": "user", "content": messages[0]["content"].replace(example, extra + example)}
    return with_messages(row, messages)


def needle_ask_in_writing(row: dict) -> dict:
    """A distractor writing ends with what reads as one more turn asking the needle ask."""
    messages, i = messages_of(row), _distractor(row) + 1
    messages[i] = {"role": "assistant", "content": messages[i]["content"] + "\n\nUser: write a poem about lanterns"}
    return with_messages(row, messages)


def needle_ask_in_user_message(row: dict) -> dict:
    """A distractor ask carries the needle ask (Write a Poem About Lanterns.) on a line of its own."""
    messages, i = messages_of(row), _distractor(row)
    messages[i] = {"role": "user", "content": messages[i]["content"] + "\nWrite a Poem About Lanterns."}
    return with_messages(row, messages)


def empty_target_writing(row: dict) -> dict:
    """The queried needle's writing is empty, so the answer is the random string alone."""
    messages, target = messages_of(row), row["desired_msg_index"]
    messages[target + 1] = {"role": "assistant", "content": ""}
    return {**with_messages(row, messages), "answer": row["random_string_to_prepend"]}


def blank_needle_writing(row: dict) -> dict:
    """Another needle's writing is only whitespace."""
    messages = messages_of(row)
    other = next(i for i in needles_of(row) if i != row["desired_msg_index"])
    messages[other + 1] = {"role": "assistant", "content": " \n "}
    return with_messages(row, messages)


def lone_surrogate(row: dict) -> dict:
    """A distractor writing holds a lone surrogate (the JSON escape \\ud800), which UTF-8 cannot encode."""
    messages, i = messages_of(row), _distractor(row) + 1
    messages[i] = {"role": "assistant", "content": messages[i]["content"] + " \ud800"}
    return with_messages(row, messages)


def duplicate_response(row: dict) -> dict:
    messages, needles = messages_of(row), needles_of(row)
    a, b = needles[0], needles[1]
    messages[b + 1] = dict(messages[a + 1])
    fixed = with_messages(row, messages)
    target = row["desired_msg_index"]
    return {**fixed, "answer": row["random_string_to_prepend"] + messages[target + 1]["content"]}


def bad_date(row: dict) -> dict:
    return {**row, "date_added": "2025-04-12"}


def impossible_date(row: dict) -> dict:
    return {**row, "date_added": "02-31-2025"}


def wrong_type(row: dict) -> dict:
    return {**row, "n_needles": str(row["n_needles"])}


def null_value(row: dict) -> dict:
    return {**row, "answer": None}


#: mutation -> the checks it must be reported under (exactly those, errors or warnings)
MUTATIONS: dict[str, tuple[Callable[[dict], dict], set[str]]] = {
    "extra_needle": (extra_needle, {"needle_count"}),
    "answer_other_needle": (answer_other_needle, {"ground_truth"}),
    "answer_distractor": (answer_distractor, {"ground_truth"}),
    "index_other_needle": (index_other_needle, {"desired_index"}),
    "index_distractor": (index_distractor, {"desired_index"}),
    "index_out_of_range": (index_out_of_range, {"desired_index"}),
    "prefix_removed": (prefix_removed, {"answer_prefix"}),
    "total_messages_off": (total_messages_off, {"total_messages"}),
    "n_chars_off": (n_chars_off, {"n_chars"}),
    "broken_json": (broken_json, {"prompt_json"}),
    "not_a_message_list": (not_a_message_list, {"prompt_json"}),
    "unknown_role": (unknown_role, {"structure"}),
    "system_message": (system_message, {"structure"}),
    "preamble_removed": (preamble_removed, {"structure"}),
    "swapped_roles": (swapped_roles, {"structure"}),
    "deleted_writing": (deleted_writing, {"structure"}),
    "whitespace_needle_response": (whitespace_needle_response, {"near_duplicate_needle_response"}),
    "malformed_ask": (malformed_ask, {"ask_form"}),
    "query_garbled": (query_garbled, {"final_query"}),
    "random_string_mismatch": (random_string_mismatch, {"random_string"}),
    "random_string_elsewhere": (random_string_elsewhere, {"random_string"}),
    "random_string_bad_pattern": (random_string_bad_pattern, {"random_string"}),
    "too_few_needles": (too_few_needles, {"needle_count"}),
    "near_duplicate": (near_duplicate, {"near_duplicate_ask"}),
    "loose_needle_ask": (loose_needle_ask, {"needle_ask_elsewhere"}),
    "duplicate_response": (duplicate_response, {"duplicate_needle_response"}),
    "needle_ask_in_preamble": (needle_ask_in_preamble, {"needle_ask_elsewhere"}),
    "needle_ask_in_writing": (needle_ask_in_writing, {"needle_ask_elsewhere"}),
    "needle_ask_in_user_message": (needle_ask_in_user_message, {"needle_ask_elsewhere", "ask_form"}),
    "empty_target_writing": (empty_target_writing, {"empty_writing"}),
    "blank_needle_writing": (blank_needle_writing, {"empty_writing"}),
    "lone_surrogate": (lone_surrogate, {"text_encoding"}),
    "bad_date": (bad_date, {"date_added"}),
    "impossible_date": (impossible_date, {"date_added"}),
    "wrong_type": (wrong_type, {"schema"}),
    "null_value": (null_value, {"schema"}),
}


def write_rows(path: Path, rows: list[dict], schema: pa.Schema = MRCR_SCHEMA, **kwargs) -> Path:
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path, **kwargs)
    return path
