"""One local Ray cluster for the whole session: 2 CPUs, no dashboard, a short temp dir, a small
object store, usage stats off, nothing written to the home folder."""

from __future__ import annotations

import os
import secrets
import shutil

import pytest


@pytest.fixture(scope="session")
def ray_cluster():
    ray = pytest.importorskip("ray")
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    os.environ["RAY_AUTH_MODE"] = "disabled"  # else a new local cluster writes ~/.ray/auth_token
    temp_dir = f"/tmp/ray-{secrets.token_hex(3)}"
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        object_store_memory=100 * 2**20,
        _temp_dir=temp_dir,
        logging_level="warning",
        configure_logging=False,
    )
    yield ray
    ray.shutdown()
    shutil.rmtree(temp_dir, ignore_errors=True)
