"""Command-line inputs naming parquet files: files, directories, globs and Hugging Face Hub paths.

`hf://datasets/ORG/NAME[@REVISION]/PATH-or-GLOB` is downloaded through huggingface_hub into its
cache (offline once cached, HF_HUB_OFFLINE=1 honoured) and expands to the cached files, which
live under `.../datasets--ORG--NAME/snapshots/COMMIT/`: the commit they came from is read back
from there (`hub_source`).
"""

from __future__ import annotations

import csv
import glob
import os
import re
import sys
from collections.abc import Callable, Iterable
from importlib.resources import files
from pathlib import Path
from urllib.parse import unquote

HF_PREFIX = "hf://datasets/"
_CACHED_FILE = re.compile(
    r"(?:^|/)datasets--(?P<org>[^/]+?)--(?P<name>[^/]+)/snapshots/(?P<commit>[0-9a-f]{40})/(?P<path>.+)$"
)


class HubPathError(ValueError):
    """An hf:// path that cannot be resolved; the message is one line."""


def parse_hub_path(text: str) -> tuple[str, str | None, str]:
    """`hf://datasets/ORG/NAME[@REVISION]/PATTERN` -> (repo id, revision or None, pattern).

    A revision with a slash (`refs/pr/1`) is written URL-encoded (`refs%2Fpr%2F1`), as on the Hub.
    An empty pattern means every parquet file of the repository.
    """
    parts = text[len(HF_PREFIX) :].split("/", 2)
    if len(parts) < 2 or not parts[0] or not parts[1]:
        raise HubPathError(f"{text}: expected hf://datasets/ORG/NAME[@REVISION]/PATH-or-GLOB")
    name, _, revision = parts[1].partition("@")
    pattern = parts[2].strip("/") if len(parts) == 3 else ""
    return f"{parts[0]}/{name}", unquote(revision) or None, pattern


def resolve_hub_path(text: str, csv: bool = False) -> str:
    """The local path (file, folder or glob) in huggingface_hub's cache that an hf:// path names;
    what it names is downloaded first unless cached. The repository's README.md (its dataset card,
    which may name the tokenizer) comes along. `csv`: a whole repository's *.csv files too."""
    repo_id, revision, pattern = parse_hub_path(text)
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise HubPathError(f"{text}: hf:// paths need huggingface_hub: pip install 'mrcr-gen[hf]'") from None
    patterns = [pattern, f"{pattern}/*"] if pattern else ["*.parquet", *(["*.csv"] if csv else [])]
    try:
        folder = Path(
            snapshot_download(repo_id, repo_type="dataset", revision=revision, allow_patterns=[*patterns, "README.md"])
        )
    except Exception as exc:  # offline and not cached, no such repo or revision, gated, no network, ...
        lines = str(exc).strip().splitlines()
        detail = lines[0] if lines else ""
        raise HubPathError(f"{text}: cannot get it from the Hub or its cache: {type(exc).__name__}: {detail}") from None
    return str(folder / pattern) if pattern else str(folder)


def hub_source(path: str | os.PathLike) -> str | None:
    """`hf://datasets/ORG/NAME@COMMIT/PATH` for a file in huggingface_hub's cache, else None:
    the exact, pinned source a run or report records."""
    match = _CACHED_FILE.search(Path(path).as_posix())
    if match is None:
        return None
    return f"{HF_PREFIX}{match['org']}/{match['name']}@{match['commit']}/{match['path']}"


def find_parquet_files(
    paths: Iterable[str | os.PathLike], csv_filter: Callable[[Path], bool] | None = None
) -> tuple[list[Path], list[tuple[str, str]]]:
    """Files, directories (every `*.parquet` below, sorted), globs and hf:// paths -> unique files
    in order, plus (input, problem) for each input that names nothing readable. With `csv_filter`,
    directories also give the `*.csv` files below that it accepts (e.g. MRCR v2 files)."""
    files: list[Path] = []
    problems: list[tuple[str, str]] = []
    for raw in paths:
        text = os.fspath(raw)
        if text.startswith(HF_PREFIX):
            try:
                local = resolve_hub_path(text, csv=csv_filter is not None)
            except HubPathError as exc:
                problems.append((text, str(exc).removeprefix(f"{text}: ")))
                continue
            found, problem = _expand(local, csv_filter)
            if problem:
                problems.append((text, f"{problem} in the downloaded repository"))
            files.extend(found)
            continue
        found, problem = _expand(text, csv_filter)
        if problem:
            problems.append((text, problem))
        files.extend(found)
    return list(dict.fromkeys(files)), problems


def _expand(text: str, csv_filter: Callable[[Path], bool] | None = None) -> tuple[list[Path], str | None]:
    path = Path(text)
    if path.is_dir():
        found = sorted(p for p in path.rglob("*.parquet") if p.is_file())
        if csv_filter is not None:
            found = sorted([*found, *(p for p in path.rglob("*.csv") if p.is_file() and csv_filter(p))])
            return found, None if found else "directory holds no *.parquet file and no MRCR v2 *.csv file"
        return found, None if found else "directory holds no *.parquet file"
    if path.exists():
        return [path], None
    if glob.has_magic(text):
        found = sorted(Path(p) for p in glob.glob(text, recursive=True) if os.path.isfile(p))
        return found, None if found else "glob matches no file"
    return [], "no such file or directory"


def _data_dir(name: str) -> Path:
    """Installed wheels carry the files in `mrcr_gen/_data/`; a source checkout has them at the top."""
    packaged = Path(str(files("mrcr_gen"))) / "_data" / name
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parent.parent / name


def raise_csv_limit() -> None:
    """Let the csv module read fields as long as MRCR v2's."""
    csv.field_size_limit(min(sys.maxsize, 2**62))  # a v2 `queries` field holds up to ~35 MB


def file_columns(path: str | os.PathLike) -> list[str] | None:
    """The column names of a CSV or parquet file, None when it cannot be read as either."""
    import pyarrow.parquet as pq

    path = Path(path)
    try:
        if path.suffix.lower() == ".csv":
            raise_csv_limit()
            # A byte-order mark is not a column; a byte that is not UTF-8 in the rows read along
            # with the header is the rows' problem (reported by row), not the header's.
            with open(path, newline="", encoding="utf-8-sig", errors="replace") as handle:
                return next(csv.reader(handle), [])
        return list(pq.read_schema(path).names)
    except Exception:
        return None
