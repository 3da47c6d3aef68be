"""Fixtures for the eval tests: small MRCR parquet files and a running chat server."""

from __future__ import annotations

from pathlib import Path

import pytest

from mrcr_gen import MrcrRow, generate_sample, write_rows
from tests.support.chat_server import ChatServer
from tests.support.rowkit import make_row

API_KEY = "sk-test-SECRET-do-not-leak-1234567890"

def handmade_row(n_needles: int, seed: int, n_pairs: int = 12) -> MrcrRow:
    """A small MRCR-shaped row built by hand (independent of the generator)."""
    return MrcrRow(**make_row(seed=1000 * n_needles + seed, n_needles=n_needles, pairs=n_pairs))


def generated_rows(specs: list[tuple[int, int]]) -> list[MrcrRow]:
    """Rows from the project's generator."""
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
