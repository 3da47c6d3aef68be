"""Sources of assistant writings for the assembler."""

from ._base import Writer
from ._memo import MemoizedWriter, OfflineWriter

__all__ = ["MemoizedWriter", "OfflineWriter", "Writer"]
