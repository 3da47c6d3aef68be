"""Pools of real writings (a parquet file of asks and their writings) that the assemblers draw from,
and the cache of model-written writings. Which writings a recipe harvests or asks for is its own."""

from ._cache import default_cache_dir
from ._pool import (
    POOL_COLUMNS,
    POOL_SCHEMA,
    PoolError,
    PoolTooSmall,
    PoolWriter,
    PoolWriting,
    parse_ask,
    read_pool,
    write_pool,
    writing_id,
)

__all__ = [
    "POOL_COLUMNS",
    "POOL_SCHEMA",
    "PoolError",
    "PoolTooSmall",
    "PoolWriter",
    "PoolWriting",
    "default_cache_dir",
    "parse_ask",
    "read_pool",
    "write_pool",
    "writing_id",
]
