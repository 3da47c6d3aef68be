"""Structural checks every MRCR row must pass: generated rows and real openai/mrcr rows alike."""

from __future__ import annotations

import json
import re

from mrcr_gen import MrcrRow, normalize_ask
from mrcr_gen._models import ASK_TEMPLATE, normalize_writing
from mrcr_gen.recipes.openai_mrcr._models import PREAMBLE_HEADER, QUERY_PATTERN

ASK_PATTERN = re.compile(r"^write a (?P<format>.+?) about (?P<entity>.+)$")


def parse_query(query: str) -> tuple[str, int, str, str]:
    match = QUERY_PATTERN.match(query)
    assert match, f"final query of unexpected form: {query[:120]!r}"
    fmt, entity = match["rest"].split(" about ", 1)
    return match["random_string"], int(match["ordinal"]), fmt, entity


def needle_indices(row: MrcrRow) -> list[int]:
    messages = json.loads(row.prompt)
    _, _, fmt, entity = parse_query(messages[-1]["content"])
    ask = ASK_TEMPLATE.format(format=fmt, entity=entity)
    return [i for i, m in enumerate(messages) if m["role"] == "user" and m["content"] == ask]


def assert_mrcr_structure(row: MrcrRow) -> None:
    """The guarantees shared by real and generated rows (see the generator issue)."""
    messages = json.loads(row.prompt)
    assert row.prompt == json.dumps(messages)
    assert all(set(m) == {"role", "content"} for m in messages)
    assert row.total_messages == len(messages)
    assert row.n_chars == sum(len(m["content"]) for m in messages)

    preamble = messages[0]
    assert preamble["role"] == "user"
    assert preamble["content"].startswith(PREAMBLE_HEADER)
    assert preamble["content"].count("======EXAMPLE======") == 2
    assert preamble["content"].count("======END EXAMPLE======") == 2

    pairs = messages[1:-1]
    assert len(pairs) % 2 == 0
    assert [m["role"] for m in pairs] == ["user", "assistant"] * (len(pairs) // 2)
    for ask in pairs[::2]:
        assert ASK_PATTERN.match(ask["content"]), ask["content"]

    rs, k, fmt, entity = parse_query(messages[-1]["content"])
    assert messages[-1]["role"] == "user"
    assert rs == row.random_string_to_prepend
    assert re.fullmatch(r"[A-Za-z0-9]{10}", rs)
    assert row.prompt.count(rs) == 1, "the random string must appear only in the final query"

    needle_ask = ASK_TEMPLATE.format(format=fmt, entity=entity)
    needles = needle_indices(row)
    assert len(needles) == row.n_needles
    key = normalize_ask(needle_ask)
    near = [m["content"] for m in pairs[::2] if normalize_ask(m["content"]) == key and m["content"] != needle_ask]
    assert not near, f"near-duplicate needle asks: {near}"
    responses = [messages[i + 1]["content"] for i in needles]
    assert len(set(map(normalize_writing, responses))) == len(responses), "needle responses must differ beyond case and spacing"

    assert 1 <= k <= row.n_needles
    assert row.desired_msg_index == needles[k - 1]
    assert row.answer == rs + messages[row.desired_msg_index + 1]["content"]
