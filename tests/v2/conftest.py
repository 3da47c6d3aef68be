"""Small MRCR v2 data for the v2 tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from mrcr_gen.recipes.mrcr_v2 import V2Config, V2OfflineWriter, generate_v2, v2_bucket


@pytest.fixture(scope="session")
def v2_data(tmp_path_factory) -> Path:
    """2 and 4 needles, (4096, 8192] and (8192, 16384], 6 rows per bucket, 3 rows per transcript (CSV)."""
    out = tmp_path_factory.mktemp("v2") / "data"
    config = V2Config(needles=(2, 4), buckets=(v2_bucket(8192), v2_bucket(16384)), samples=6,
                      rows_per_transcript=3, seed=5, out=out)
    generate_v2(config, V2OfflineWriter(5))
    return out


@pytest.fixture(scope="session")
def v2_csv(v2_data) -> Path:
    return v2_data / "4needle" / "mrcr_v2_4needle_in_(8192,16384).csv"
