"""A tokenizer trained in the test session (no download) and a dataset generated with it."""

from __future__ import annotations

from pathlib import Path

import pytest

from mrcr_gen import GenerateConfig, OfflineWriter, bin_by_upper, generate_dataset
from tests.support.tiny_tokenizer import write_tiny_tokenizer


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory) -> Path:
    return write_tiny_tokenizer(tmp_path_factory.mktemp("tiny-tokenizer"))


@pytest.fixture(scope="session")
def tiny_spec(tiny_dir) -> str:
    return f"hf:{tiny_dir}"


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory, tiny_spec) -> Path:
    """2 and 4 needles, 3 rows each in (8192, 16384] by the tiny tokenizer's count."""
    out = tmp_path_factory.mktemp("tiny-data")
    config = GenerateConfig(needles=(2, 4), bins=(bin_by_upper(16384),), samples=3, seed=5, out=out, tokenizer=tiny_spec)
    generate_dataset(config, OfflineWriter(5, tokenizer=tiny_spec), command="mrcr-gen (test)")
    return out
