"""Package names imported on first use: a package `__init__` declares where each of its names
lives, and importing the package imports none of them (so `mrcr-gen --help` never loads pyarrow,
the tokenizer or the openai client)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any


def lazy_exports(package: str, where: dict[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` for `package`: `where[name]` is the module (relative to `package`)
    that defines `name`; it is imported on the first use of the name, which is then kept."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
