"""Fixtures for the eval tests: small MRCR parquet files and a running chat server."""

from __future__ import annotations

import json
import random
import string
from pathlib import Path

import pytest

from mrcr_gen import MrcrRow, write_rows
from tests.support.chat_server import ChatServer

REAL_ROWS = Path("/work/shared/mrcr-real/mrcr_real_rows.parquet")
API_KEY = "sk-test-SECRET-do-not-leak-1234567890"

FORMATS = ["poem", "riddle", "short essay", "email", "song"]
ENTITIES = ["lanterns", "glaciers", "accountants", "the harbour", "bicycles", "thunder", "orchards"]


def _ordinal(k: int) -> str:
    if 10 <= k % 100 <= 20:
        return f"{k}th"
    return f"{k}{ {1: 'st', 2: 'nd', 3: 'rd'}.get(k % 10, 'th') }"


def handmade_row(n_needles: int, seed: int, n_pairs: int = 12) -> MrcrRow:
    """A small MRCR-shaped row built here (independent of the generator)."""
    rng = random.Random(f"{n_needles}:{seed}")
    rs = "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(10))
    fmt, entity = rng.choice(FORMATS), rng.choice(ENTITIES)
    needle_ask = f"write a {fmt} about {entity}"
    slots = sorted(rng.sample(range(n_pairs), n_needles))
    messages = [{"role": "user", "content": "Here are some examples of conversations succeeded by a follow-up question answered correctly:\n(none here)"}]
    needle_msgs = []
    for i in range(n_pairs):
        if i in slots:
            ask = needle_ask
        else:
            while True:
                ask = f"write a {rng.choice(FORMATS)} about {rng.choice(ENTITIES)}"
                if ask != needle_ask:
                    break
        words = " ".join(rng.choice(["tide", "amber", "quiet", "stone", "river", "glass", "ember", "wind"]) for _ in range(rng.randint(8, 30)))
        if ask == needle_ask:
            needle_msgs.append(len(messages))
        messages.append({"role": "user", "content": ask})
        messages.append({"role": "assistant", "content": f"{ask.title()} #{i}: {words}."})
    k = rng.randint(1, n_needles)
    messages.append(
        {
            "role": "user",
            "content": f"Prepend {rs} to the {_ordinal(k)} (1 indexed) {fmt} about {entity}. Do not include any other text in your response.",
        }
    )
    target = needle_msgs[k - 1]
    return MrcrRow(
        prompt=json.dumps(messages),
        answer=rs + messages[target + 1]["content"],
        random_string_to_prepend=rs,
        n_needles=n_needles,
        desired_msg_index=target,
        total_messages=len(messages),
        n_chars=sum(len(m["content"]) for m in messages),
        date_added="01-01-2026",
    )


def generated_rows(specs: list[tuple[int, int]]) -> list[MrcrRow]:
    """Rows from the project's generator when it exists, else handmade ones."""
    try:
        from mrcr_gen import generate_sample
    except ImportError:
        return [handmade_row(n, seed) for n, seed in specs]
    return [generate_sample(n_needles=n, bin_upper=8192, seed=seed).row for n, seed in specs]


@pytest.fixture(scope="session")
def small_data(tmp_path_factory) -> Path:
    """12 handmade rows (2/4/8 needles, under 4096 tokens): fast, for faults and CLI tests."""
    path = tmp_path_factory.mktemp("data") / "small.parquet"
    write_rows([handmade_row(n, seed) for seed in range(4) for n in (2, 4, 8)], path)
    return path


@pytest.fixture(scope="session")
def gen_data(tmp_path_factory) -> Path:
    """6 generated rows in the (4096, 8192] bin, 2, 4 and 8 needles."""
    path = tmp_path_factory.mktemp("gen") / "gen.parquet"
    write_rows(generated_rows([(n, seed) for n in (2, 4, 8) for seed in (11, 12)]), path)
    return path


@pytest.fixture()
def server():
    with ChatServer("oracle") as running:
        yield running


@pytest.fixture()
def api_key(monkeypatch) -> str:
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    return API_KEY
