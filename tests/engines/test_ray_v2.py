"""MRCR v2 on the session's local Ray cluster: the same files as the local engine gives."""

from __future__ import annotations

from pathlib import Path

import pytest

from mrcr_gen.engines import LocalEngine
from mrcr_gen.recipes.mrcr_v2 import V2OfflineWriter, generate_v2
from tests.v2.test_engines import config, data_digests

pytestmark = pytest.mark.usefixtures("ray_cluster")


@pytest.mark.parametrize("file_format", ["csv", "parquet"])
def test_ray_gives_the_local_engines_files(tmp_path: Path, file_format: str) -> None:
    from mrcr_gen.engines import RayEngine

    local = config(tmp_path / "local", format=file_format)
    generate_v2(local, V2OfflineWriter(9), engine=LocalEngine(1))
    with RayEngine() as engine:
        generate_v2(config(tmp_path / "ray", format=file_format), V2OfflineWriter(9), engine=engine)
        for k in (1, 2):
            shard = config(tmp_path / "shards", format=file_format, shard=(k, 2))
            generate_v2(shard, V2OfflineWriter(9), engine=engine)
    assert data_digests(tmp_path / "ray") == data_digests(local.out) == data_digests(tmp_path / "shards")
