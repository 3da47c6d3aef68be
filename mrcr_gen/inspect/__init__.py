"""MRCR inside Inspect (inspect_ai): the tasks `mrcr_gen/mrcr` and `mrcr_gen/mrcr_v2`, and the
bridges between Inspect's logs and `mrcr-eval`'s run directories.

Everything here needs the `[inspect]` extra; this module itself imports nothing of inspect_ai, so
that `import mrcr_gen` and every command stay free of it (the names below load on first use):

* `mrcr`, `mrcr_v2` (`_tasks`): the Inspect tasks, registered through the `inspect_ai` entry point;
* `mrcr_dataset` (`_dataset`): the lazy dataset they read;
* `export_run` (`_export`): a run directory -> an Inspect log (`mrcr-eval export-inspect`);
* `is_inspect_log`, `read_inspect_log`, `summarize_inspect_log`, `compare_paths`, `inspect_log_view`,
  `view_path` (`_import`): an Inspect log of these tasks (or one `export_run` wrote) -> results
  records, a run dict, a summary, the HTML report.
"""

from __future__ import annotations

from typing import Any

_HOMES = {
    "mrcr": "_tasks",
    "mrcr_v2": "_tasks",
    "mrcr_dataset": "_dataset",
    "export_run": "_export",
    "is_inspect_log": "_import",
    "read_inspect_log": "_import",
    "summarize_inspect_log": "_import",
    "compare_paths": "_import",
    "inspect_log_view": "_import",
    "view_path": "_import",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'mrcr_gen.inspect' has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f"{__name__}.{_HOMES[name]}"), name)


__all__ = sorted(_HOMES)
