"""Pools of real writings: harvested from MRCR files or written by an LLM, drawn by the assembler."""

from ._harvest import HarvestReport, catalog_path, harvest
from ._llm import (
    PRICES,
    BuildError,
    BuildReport,
    build_pool_openai,
    default_cache_dir,
    plan_asks,
)
from ._pool import (
    POOL_COLUMNS,
    POOL_SCHEMA,
    PoolError,
    PoolTooSmall,
    PoolWriter,
    PoolWriting,
    parse_ask,
    pool_requirements,
    read_pool,
    write_pool,
    writing_id,
)
from ._shortcut import WritingsFailed, build_pool_for_request

__all__ = [
    "POOL_COLUMNS",
    "POOL_SCHEMA",
    "PRICES",
    "BuildError",
    "BuildReport",
    "HarvestReport",
    "PoolError",
    "PoolTooSmall",
    "PoolWriter",
    "PoolWriting",
    "WritingsFailed",
    "build_pool_for_request",
    "build_pool_openai",
    "catalog_path",
    "default_cache_dir",
    "harvest",
    "parse_ask",
    "plan_asks",
    "pool_requirements",
    "read_pool",
    "write_pool",
    "writing_id",
]
