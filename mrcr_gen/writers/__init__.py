"""What every source of assistant writings shares: the `Writer` protocol the assemblers draw from,
and `MemoizedWriter`, which composes each writing once and shares them between workers."""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from ._base import Writer
    from ._memo import MemoizedWriter

# Each name is imported on first use: a command imports only what it uses (its start stays fast).
__getattr__ = lazy_exports(
    __name__,
    {
        **dict.fromkeys(["Writer"], "._base"),
        **dict.fromkeys(["MemoizedWriter"], "._memo"),
    },
)

__all__ = ["MemoizedWriter", "Writer"]
