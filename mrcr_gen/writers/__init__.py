"""What every source of assistant writings shares: the `Writer` protocol the assemblers draw from,
and `MemoizedWriter`, which composes each writing once and shares them between workers."""

from ._base import Writer
from ._memo import MemoizedWriter

__all__ = ["MemoizedWriter", "Writer"]
