"""`difflib.SequenceMatcher(None, a, b).ratio()`, the same number, several times faster.

The reference floors grade 20-odd pairs of unrelated writings per row, and pure-Python
`SequenceMatcher` spends about 3 ms on each pair of 1,500-character writings: 80% of a row's
grading, which caps how many rows per second `mrcr-eval` can score. Almost all of that time is
`find_longest_match` walking, for every character of `a`, the positions in `b` of that character,
again in every recursive call.

This module computes the very same matching blocks (hence the same ratio, bit for bit) from one
precomputed table. With SequenceMatcher's defaults (no junk function, autojunk on), a character of
`b` is "popular" when `b` has at least 200 characters and it occurs in more than 1% of them; the
longest match of a window is the longest run of equal, non-popular characters on one diagonal
(`j - i` constant) inside the window, the one that starts earliest in `a`, then in `b`, then
extended on both sides by equal characters of any kind. So the runs of every diagonal are found
once with numpy ("segments", ordered by where they start), and each window's longest match is the
segment whose part inside the window is the longest, among the few that start near the window's
rows (one slice, found by bisection).

Tests compare every block list with difflib's on random and generated texts; the official grade
itself still calls difflib.
"""

from __future__ import annotations

import bisect
import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy is imported where it is used: importing this module stays cheap
    import numpy as np

# Below this many segments a window is searched in plain Python: numpy's per-call cost is
# larger than the loop.
_PYTHON_BELOW = 24


def _codes(text: str) -> np.ndarray:
    import numpy as np

    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)


_LAST = (1 << 63) - 1  # numpy's int64 max


@functools.lru_cache(maxsize=8)
def _index_of(b: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """b's positions sorted by character (`order`), its distinct characters, where each starts in
    `order`, and how many of each can start a match (0 for a popular one). Cached: the floors
    compare a row's one answer with 20-odd writings."""
    import numpy as np

    b_codes = _codes(b)
    order = np.argsort(b_codes, kind="stable")  # stable: each character's positions ascend, as in b2j
    distinct, first, counts = np.unique(b_codes[order], return_index=True, return_counts=True)
    if len(b_codes) >= 200:  # SequenceMatcher's autojunk: b's popular characters never start a match
        counts[counts > len(b_codes) // 100 + 1] = 0
    if not len(distinct):  # b is empty: one character that matches nothing
        distinct, first, counts = np.zeros(1, np.uint32), np.zeros(1, np.int64), np.zeros(1, np.int64)
    for shared in (order, distinct, first, counts):
        shared.flags.writeable = False  # cached, so shared between calls
    return order, distinct, first, counts


class _Segments:
    """Maximal runs of equal non-popular characters along the diagonals of (a, b), ordered by
    their start in a, then in b: `start_i` (also as the list `starts`, for bisection), `end_i`
    (exclusive) and `diagonal` (the start in b minus the start in a), and the longest run's length."""

    def __init__(self, a: str, b: str):
        import numpy as np

        a_codes = _codes(a)
        order, distinct, first, counts = _index_of(b)
        where = np.minimum(np.searchsorted(distinct, a_codes), len(distinct) - 1)
        hits = np.where(distinct[where] == a_codes, counts[where], 0)
        self.span = len(b) + 1  # more than any position in b
        total = int(hits.sum())
        if total == 0:
            self.start_i = self.end_i = self.diagonal = np.zeros(0, dtype=np.int64)
            self.longest = 0
            self.starts = []
            return
        cell_i = np.repeat(np.arange(len(a_codes), dtype=np.int64), hits)
        offsets = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(hits) - hits, hits)
        cell_j = order[np.repeat(first[where], hits) + offsets].astype(np.int64)
        # By diagonal, then by i: a run is a stretch of consecutive i on one diagonal.
        diagonal = cell_j - cell_i
        by_diagonal = np.argsort(diagonal * (len(a_codes) + 1) + cell_i)
        cell_i, diagonal = cell_i[by_diagonal], diagonal[by_diagonal]
        starts = np.ones(total, dtype=bool)
        starts[1:] = (diagonal[1:] != diagonal[:-1]) | (cell_i[1:] != cell_i[:-1] + 1)
        start_index = np.flatnonzero(starts)
        lengths = np.diff(np.append(start_index, total))
        start_i, diagonal = cell_i[start_index], diagonal[start_index]
        by_start = np.argsort(start_i * (self.span + len(a_codes)) + diagonal)  # (i, j) order
        self.start_i, self.diagonal = start_i[by_start], diagonal[by_start]
        self.end_i = self.start_i + lengths[by_start]
        self.longest = int(lengths.max())
        self.starts = self.start_i.tolist()

    def longest_in(self, alo: int, ahi: int, blo: int, bhi: int) -> tuple[int, int, int]:
        """The longest part of a run inside the window, earliest in a, then in b: what
        `find_longest_match` finds before it extends the match ((alo, blo, 0) if none)."""
        import numpy as np

        # Runs that reach into [alo, ahi) in a start in [alo - longest + 1, ahi): one slice.
        lo = bisect.bisect_left(self.starts, alo - self.longest + 1)
        hi = bisect.bisect_left(self.starts, ahi, lo)
        if hi - lo < _PYTHON_BELOW:
            best_i, best_j, best_size = alo, blo, 0
            runs = (self.start_i[lo:hi].tolist(), self.end_i[lo:hi].tolist(), self.diagonal[lo:hi].tolist())
            for i, end, diagonal in zip(*runs, strict=True):
                start = max(i, alo, blo - diagonal)
                size = min(end, ahi, bhi - diagonal) - start
                if size > best_size or (size == best_size > 0 and (start, start + diagonal) < (best_i, best_j)):
                    best_i, best_j, best_size = start, start + diagonal, size
            return best_i, best_j, best_size
        diagonal = self.diagonal[lo:hi]
        start = np.maximum(np.maximum(self.start_i[lo:hi], alo), blo - diagonal)
        size = np.minimum(np.minimum(self.end_i[lo:hi], ahi), bhi - diagonal) - start
        best_size = int(size.max())
        if best_size <= 0:
            return alo, blo, 0
        # Of the longest, the earliest start in a, then in b (ties are the rule: most runs are 1 long).
        starts_ij = np.where(size == best_size, start * self.span + start + diagonal, _LAST)
        pick = int(starts_ij.argmin())
        best_i = int(start[pick])
        return best_i, best_i + int(diagonal[pick]), best_size


def _find_longest_match(
    a: str, b: str, segments: _Segments, alo: int, ahi: int, blo: int, bhi: int
) -> tuple[int, int, int]:
    """SequenceMatcher.find_longest_match(alo, ahi, blo, bhi) with no junk function, autojunk on."""
    i, j, size = segments.longest_in(alo, ahi, blo, bhi)
    # Extend by equal characters on both sides, popular ones included, as difflib does (with no
    # junk function, its two other extension loops never run).
    while i > alo and j > blo and a[i - 1] == b[j - 1]:
        i, j, size = i - 1, j - 1, size + 1
    while i + size < ahi and j + size < bhi and a[i + size] == b[j + size]:
        size += 1
    return i, j, size


def matching_blocks(a: str, b: str) -> list[tuple[int, int, int]]:
    """`SequenceMatcher(None, a, b).get_matching_blocks()` as plain tuples, the final dummy included."""
    if a == b:  # difflib finds the whole text at once (the floors' own needle is such a pair)
        return [(0, 0, len(a)), (len(a), len(b), 0)] if a else [(0, 0, 0)]
    segments = _Segments(a, b)
    queue = [(0, len(a), 0, len(b))]
    blocks = []
    while queue:
        alo, ahi, blo, bhi = queue.pop()
        i, j, k = _find_longest_match(a, b, segments, alo, ahi, blo, bhi)
        if k:
            blocks.append((i, j, k))
            if alo < i and blo < j:
                queue.append((alo, i, blo, j))
            if i + k < ahi and j + k < bhi:
                queue.append((i + k, ahi, j + k, bhi))
    blocks.sort()
    merged: list[tuple[int, int, int]] = []
    i1 = j1 = k1 = 0
    for i2, j2, k2 in blocks:
        if i1 + k1 == i2 and j1 + k1 == j2:
            k1 += k2
        else:
            if k1:
                merged.append((i1, j1, k1))
            i1, j1, k1 = i2, j2, k2
    if k1:
        merged.append((i1, j1, k1))
    merged.append((len(a), len(b), 0))
    return merged


def ratio(a: str, b: str) -> float:
    """`SequenceMatcher(None, a, b).ratio()`: 2 * matched characters / (len(a) + len(b)), 1.0 for two empty texts."""
    total = len(a) + len(b)
    if not total:
        return 1.0
    return 2.0 * sum(size for _, _, size in matching_blocks(a, b)) / total
