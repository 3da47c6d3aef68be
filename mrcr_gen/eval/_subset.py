"""`mrcr-eval --per-bin K`: the same K rows per (bin, needle count) every time, on any machine.

Each row is ranked by `subset_rank(seed, digest)`, a sha256 of the seed and the row's content
digest, and each cell keeps its K lowest ranks (ties, i.e. the same row content twice, broken by
the file's sha256 and the row index). Rank depends on the content alone, never on paths, order or
machine, so K=10 is a subset of K=50, which is a subset of all the rows. The bin is decided by the
run's tokenizer (`--tokenizer`), as every bin of the run is. Rows that cannot be read (a row-level
error) are always kept: they are reported as errors, as the other filters keep them.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ._items import EvalRecipe, FileError, read_items

RANK_RULE = "sha256('<seed>:<digest>'), lowest K per (bin, needle count); ties by data sha256, row"

Ranked = tuple[str, str, int, str]  # (subset_rank, the file's sha256, row, path)

# (path, row, digest) -> the row's (bin upper edge, needle count) when a stored record knows them
StoredCell = Callable[[str, int, str], "tuple[int, int] | None"]


def subset_rank(seed: int, digest: str) -> str:
    return hashlib.sha256(f"{seed}:{digest}".encode()).hexdigest()


def per_bin_rows(
    files: Sequence[str],
    shas: dict[str, str],
    k: int,
    seed: int,
    *,
    recipes: Sequence[EvalRecipe],
    tokenizer_spec: str,
    stored: StoredCell,
) -> set[tuple[str, int]]:
    """The (file, row) pairs `--per-bin k` keeps of `files`. A row whose cell a stored record knows
    (`stored`) is not parsed nor tokenized; a file that cannot be read keeps the rows read before
    it broke (the runner reports the file)."""
    cells: dict[tuple[int, int], list[tuple[str, str, int, str]]] = defaultdict(list)
    kept: set[tuple[str, int]] = set()
    for path in files:
        known: dict[int, tuple[int, int]] = {}

        def skip(row: int, digest: str, path: str = path, known: dict = known) -> bool:
            cell = stored(path, row, digest)
            if cell is not None:
                known[row] = cell
            return cell is not None

        try:
            for item in read_items(path, recipes=recipes, tokenizer_spec=tokenizer_spec, skip=skip):
                if item.error is not None:
                    kept.add((path, item.row))
                    continue
                cell = known.pop(item.row, None) or (item.bin_upper, item.n_needles)
                cells[cell].append((subset_rank(seed, item.digest), shas[path], item.row, path))
        except FileError:
            continue
    kept.update((path, row) for _, _, row, path in keep_lowest(cells, k))
    return kept


def keep_lowest(cells: Mapping[Any, Sequence[Ranked]], k: int) -> list[Ranked]:
    """The K lowest members of each cell: `(rank, data sha256, row, path)`, the order `--per-bin` keeps."""
    return [member for members in cells.values() for member in sorted(members)[:k]]
