"""Command-line inputs naming parquet files: files, directories and globs."""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable
from pathlib import Path


def find_parquet_files(paths: Iterable[str | os.PathLike]) -> tuple[list[Path], list[tuple[str, str]]]:
    """Files, directories (every `*.parquet` below, sorted) and globs -> unique files in order,
    plus (input, problem) for each input that names nothing readable."""
    files: list[Path] = []
    problems: list[tuple[str, str]] = []
    for raw in paths:
        text = os.fspath(raw)
        path = Path(text)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*.parquet") if p.is_file())
            if not found:
                problems.append((text, "directory holds no *.parquet file"))
            files.extend(found)
        elif path.exists():
            files.append(path)
        elif glob.has_magic(text):
            found = sorted(Path(p) for p in glob.glob(text, recursive=True) if os.path.isfile(p))
            if not found:
                problems.append((text, "glob matches no file"))
            files.extend(found)
        else:
            problems.append((text, "no such file or directory"))
    return list(dict.fromkeys(files)), problems
