"""Griffe extension: document the names a package loads on first use.

`mrcr_gen` (and `mrcr_gen.engines`) export some names through a module `__getattr__`, so that
importing the package stays cheap; static analysis cannot follow that. For every module of the
package that declares `__all__` and a `__getattr__`, each name of its runtime `__all__` that
griffe did not find becomes an alias to where the object is defined (its `__module__` and
`__qualname__`, found by importing it; for a constant, the submodule that assigns it). The docs
can then name `mrcr_gen.grade_v2` wherever the code behind it lives.

Used by mkdocs.yml (mkdocstrings' `extensions` option); not a page of the site.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import griffe

logger = griffe.get_logger("griffe_lazy_exports")


class LazyExports(griffe.Extension):
    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        sources = Path(pkg.filepath).resolve().parent  # import the code griffe read, not another install
        if str(sources.parent) not in sys.path:
            sys.path.insert(0, str(sources.parent))
        for module in _modules(pkg):
            if module.exports is None or "__getattr__" not in module.members:  # nothing loaded lazily
                continue
            runtime = importlib.import_module(module.path)
            if Path(runtime.__file__).resolve() != Path(module.filepath).resolve():
                logger.warning(f"{module.path}: imported from {runtime.__file__}, not from {module.filepath}")
            names = list(getattr(runtime, "__all__", ()))
            for name in names:
                if name not in module.members:
                    target = _definition(module, name, getattr(runtime, name))
                    if target is None:
                        logger.warning(f"{module.path}.{name}: cannot find where it is defined")
                        continue
                    module.set_member(name, griffe.Alias(name, target, parent=module))
            module.exports = names


def _definition(module: griffe.Module, name: str, value: object) -> str | None:
    """The path of the object behind `module.name`: a class's or function's own module and
    qualified name, else the one submodule of `module` that defines `name` (a constant)."""
    qualname = getattr(value, "__qualname__", None)
    if isinstance(qualname, str) and isinstance(getattr(value, "__module__", None), str):
        return f"{value.__module__}.{qualname}"
    subs = [sub for sub in _modules(module) if sub is not module]
    found = [sub.path for sub in subs if name in sub.members and not sub[name].is_alias]
    return f"{found[0]}.{name}" if len(found) == 1 else None


def _modules(module: griffe.Module):
    yield module
    for sub in module.modules.values():
        if not sub.is_alias:
            yield from _modules(sub)
