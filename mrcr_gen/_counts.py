"""A row's token counts, computed once in its life.

The generator counts every row it writes and records the counts in the file's sidecar
(`X.samples.jsonl`), sealed to the file: each line holds the file's sha256 and a `seal` over
(file sha256, tokenizer, row, prompt tokens, total tokens). Readers (`mrcr-eval`, `mrcr-grade`,
`mrcr-validate`, the Inspect tasks) take a row's counts from there when the seal matches the
file as it is now and the tokenizer they count with (`SidecarCounts`); else from a cache in the
user cache folder keyed by (row digest, tokenizer) (`CountCache`); else they count, on every
core (`counted_in_order`), and add the counts to the cache.

Nothing here can change a result: a sidecar whose file changed, whose tokenizer differs or
whose numbers were edited fails its seal and is ignored; a cache line is keyed by the digest of
the row's content (what the counts are a function of) and carries a check over its key and
numbers, so a torn or corrupted line is ignored too. The cache is one file per tokenizer, appended
to; each line is one `write` of a file opened with O_APPEND, so concurrent runs never interleave
lines, and a reader ignores a line a crash tore. It is compacted (rewritten whole, then renamed over
the old one) when it grows large or holds many duplicated lines: see `CountCache`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from functools import lru_cache
from pathlib import Path
from typing import Generic, TypeVar

from ._card import sidecar_path
from ._files import default_cache_dir, file_sha256, finished_path

COUNTS_FOLDER = "token-counts"

#: (prompt tokens, total tokens): what a reader needs of a row (total = what decides its bin).
Counts = tuple[int, int]


@lru_cache(maxsize=16)
def tokenizer_key(spec: str) -> str:
    """A short fingerprint of what the tokenizer `spec` is (its spec, library and vocabulary
    sha256 where known): two tokenizers that may count differently never share it."""
    from ._tokens import load_tokenizer

    described = load_tokenizer(spec).describe()
    return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()[:16]


def seal(data_sha256: str, tokenizer: str, row: int, prompt: int, total: int, counted: object = None) -> str:
    """What a sidecar line's `seal` holds: a digest tying its counts to the file and the tokenizer
    (`tokenizer` is a `tokenizer_key`), and the line's `counted` (a recipe's further counts of the
    row, any JSON) when it has one."""
    text = f"{data_sha256}\t{tokenizer}\t{row}\t{prompt}\t{total}"
    if counted is not None:
        text += "\t" + json.dumps(counted, sort_keys=True, separators=(",", ":"))
    return hashlib.blake2b(text.encode(), digest_size=12).hexdigest()


def sealed_sidecar(
    lines: Sequence[str], path: str | os.PathLike, tokenizer_spec: str, data_sha256: str | None = None
) -> str:
    """A sidecar's text with each line's counts sealed to the data file `path` as written (its
    sha256, `data_sha256` when its writer hashed it) and to the tokenizer: `prompt_tokens` (the part
    sent) and `n_tokens` (the total, what decides the bin). A line without both is left as it is:
    readers count its row."""
    sha, key = data_sha256 or file_sha256(finished_path(path)), tokenizer_key(tokenizer_spec)
    sealed = []
    for row, line in enumerate(lines):
        record = json.loads(line)
        counts = record_counts(record)
        if counts is not None:
            record |= {"data_sha256": sha, "seal": seal(sha, key, row, *counts, record.get("counted"))}
        sealed.append(json.dumps(record) + "\n")
    return "".join(sealed)


def record_counts(record: object) -> Counts | None:
    """(`prompt_tokens`, `n_tokens`) of a sidecar record, when it holds both as ints."""
    if not isinstance(record, dict):
        return None
    prompt, total = record.get("prompt_tokens"), record.get("n_tokens")
    if type(prompt) is not int or type(total) is not int:
        return None
    return prompt, total


class SidecarCounts:
    """The counts a file's sidecar records for its rows, where they are sealed to the file as it
    is now and to `tokenizer_spec`; a row whose line fails has none (`get` returns None). Read on
    first use (a checker that never asks never hashes the file), and before it is pickled for a
    worker (the file is hashed once, here, not in every worker)."""

    def __init__(self, path: str | os.PathLike, tokenizer_spec: str, data_sha256: str | None = None) -> None:
        self.path, self.tokenizer_spec, self.data_sha256 = Path(path), tokenizer_spec, data_sha256
        self._counts: dict[int, Counts] | None = None
        self._counted: dict[int, object] = {}  # a row's sealed `counted`, where its line has one

    @property
    def counts(self) -> dict[int, Counts]:
        if self._counts is None:
            self._counts = self._read()
        return self._counts

    def get(self, row: int) -> Counts | None:
        return self.counts.get(row)

    def counted(self, row: int) -> object:
        """The recipe's further counts of `row` (its line's `counted`), sealed with its totals; None
        when its line has none or fails its seal."""
        self.counts  # noqa: B018 (read on first use)
        return self._counted.get(row)

    def __getstate__(self) -> dict:
        self.counts  # noqa: B018 (read now: the workers get the counts, not the work)
        return self.__dict__

    def _read(self) -> dict[int, Counts]:
        found: dict[int, Counts] = {}
        try:
            sidecar = sidecar_path(self.path)
            lines = sidecar.read_text(encoding="utf-8").splitlines() if sidecar.is_file() else []
        except (OSError, ValueError):
            return found
        sha, key = self.data_sha256, None
        for row, line in enumerate(lines):
            try:
                record = json.loads(line)
            except ValueError:
                continue
            counts = record_counts(record)
            if counts is None or not isinstance(record.get("data_sha256"), str):
                continue
            try:
                sha = sha or file_sha256(self.path)  # only for a sidecar that records one
            except OSError:
                return found
            key = key or tokenizer_key(self.tokenizer_spec)
            counted = record.get("counted")
            if record["data_sha256"] == sha and record.get("seal") == seal(sha, key, row, *counts, counted):
                found[row] = counts
                if counted is not None:
                    self._counted[row] = counted
        return found


def _check(tokenizer: str, key: str, value: str) -> str:
    return hashlib.blake2b(f"{tokenizer}\t{key}\t{value}".encode(), digest_size=8).hexdigest()


def _line(tokenizer: str, key: str, value: str) -> bytes:
    """A cache file's line: a key, its value (no line break) and a check over them and the tokenizer."""
    return f"{key}\t{value}\t{_check(tokenizer, key, value)}\n".encode()


#: What a compaction keeps: the most recently added rows' counts, at most this many...
KEEP_ENTRIES = 100_000
#: ... in at most this many bytes (100,000 lines of sha256 digests take about 9.5 MB).
KEEP_BYTES = 10_000_000
#: A cache file is compacted when it grows past this size ...
COMPACT_BYTES = 20_000_000
#: ... or holds this many more lines than twice its distinct rows (runs that counted the same rows at once).
DUPLICATE_SLACK = 1_000


def _parse(tokenizer: str, text: str) -> tuple[dict[str, str], int]:
    """The valid lines of a cache file's text ({key: value}, in the order of their last line) and
    how many lines it holds (torn and duplicated ones too). A value may hold tabs: the key ends at
    the first, the check starts after the last."""
    values: dict[str, str] = {}
    lines = 0
    for line in text.split("\n"):  # the last piece: empty, or a line a crash tore
        lines += bool(line)
        key, _, rest = line.partition("\t")
        value, _, check = rest.rpartition("\t")
        if key and value and check == _check(tokenizer, key, value):
            values.pop(key, None)  # a later line is a more recent one
            values[key] = value
    return values, lines


def _compaction_due(size: int, lines: int, distinct: int) -> bool:
    return size > COMPACT_BYTES or lines > 2 * distinct + DUPLICATE_SLACK


@contextlib.contextmanager
def _flock(path: Path, operation: int) -> Iterator[bool]:
    """Hold `fcntl.flock(operation)` on the lock file `path` for the body; False when a
    non-blocking lock is held by another process, or the file system has no locks. The lock dies
    with its process."""
    import fcntl

    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, operation)
            held = True
        except OSError:  # BlockingIOError: another holder; ENOLCK and the like: no locks here
            held = False
        yield held
    finally:
        os.close(fd)  # closing releases the lock


class CheckedLines:
    """A cache file of `key \t value \t check` lines for one tokenizer (`tokenizer`: its
    `tokenizer_key`, part of each check), read whole on first use (`values`) and appended to by
    concurrent runs; a torn or edited line fails its check and is ignored.

    Appends hold a shared lock on the file's `.lock` from opening the file to their write (one
    `write` of a file opened with O_APPEND: lines are never interleaved); a compaction holds it
    exclusively while it rewrites the file to a temporary file and `os.replace`s it: so a line
    appended is in the file the compaction reads (never lost, unless it is among the oldest a
    compaction drops), and a reader, which takes no lock, sees the old file or the new, whole.
    A compaction keeps the `KEEP_ENTRIES` keys added most recently (within `KEEP_BYTES`), once
    each; a process that writes runs it when the file outgrows `COMPACT_BYTES` or holds many
    duplicated lines, and skips it when another process holds the lock (a later write retries).
    """

    def __init__(self, path: Path, tokenizer: str) -> None:
        self.path, self.tokenizer = path, tokenizer
        self.lock_path = path.with_suffix(".lock")
        self._values: dict[str, str] | None = None
        self._compact = False  # compaction due (found when loading)

    def values(self) -> dict[str, str]:
        if self._values is None:
            try:
                data = self.path.read_bytes()
            except OSError:
                data = b""
            self._values, lines = _parse(self.tokenizer, data.decode("utf-8", errors="replace"))
            self._compact = _compaction_due(len(data), lines, len(self._values))
        return self._values

    def append(self, key: str, value: str) -> None:
        """Add `key`'s `value` (best effort: a cache that cannot be written is no cache); a key or
        value with a line break, or a key with a tab, is not kept."""
        import fcntl

        if "\t" in key or "\n" in key or "\n" in value or not key or not value:
            return
        self.values()[key] = value
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # No compaction between the open and the write (without locks, no compaction at all).
            with _flock(self.lock_path, fcntl.LOCK_SH):
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                try:
                    os.write(fd, _line(self.tokenizer, key, value))  # one write: whole, never interleaved
                    size = os.fstat(fd).st_size
                finally:
                    os.close(fd)
        except OSError:
            return
        if self._compact or size > COMPACT_BYTES:
            self._compact = not self.compact(only_if_due=True)

    def compact(self, *, only_if_due: bool = False) -> bool:
        """Rewrite the file with each valid key once, the most recent `KEEP_ENTRIES` (within
        `KEEP_BYTES`); with `only_if_due`, only when it is due (see the class). False when
        another process holds the lock (nothing done); True otherwise (best effort: a file that
        cannot be rewritten is left as it is)."""
        import fcntl

        try:
            with _flock(self.lock_path, fcntl.LOCK_EX | fcntl.LOCK_NB) as held:
                if not held:
                    return False
                data = self.path.read_bytes()
                values, lines = _parse(self.tokenizer, data.decode("utf-8", errors="replace"))
                if not only_if_due or _compaction_due(len(data), lines, len(values)):
                    self._rewrite(values)
        except OSError:
            pass
        return True

    def _rewrite(self, values: dict[str, str]) -> None:
        """The file replaced by `values`' most recent entries (under the exclusive lock)."""
        kept: list[bytes] = []
        size = 0
        for key, value in reversed(values.items()):
            line = _line(self.tokenizer, key, value)
            if len(kept) == KEEP_ENTRIES or size + len(line) > KEEP_BYTES:
                break
            kept.append(line)
            size += len(line)
        stem = self.path.stem
        for stale in self.path.parent.glob(f".{stem}.*.tmp"):  # a compaction killed midway
            stale.unlink(missing_ok=True)
        fd, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=f".{stem}.", suffix=".tmp")
        try:  # (OSError before it: the caller's)
            with os.fdopen(fd, "wb") as handle:
                handle.write(b"".join(reversed(kept)))
                os.fchmod(handle.fileno(), 0o644)
            os.replace(temporary, self.path)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(temporary)


def counts_value(counts: Counts) -> str:
    """How a count cache line holds a row's counts: `prompt \t total`."""
    return f"{counts[0]}\t{counts[1]}"


def _counts_of(value: str) -> Counts | None:
    prompt, _, total = value.partition("\t")
    return (int(prompt), int(total)) if prompt.isdigit() and total.isdigit() else None


V = TypeVar("V")


class CheckedCache(Generic[V]):
    """Values by key in a `CheckedLines` file, read on first use: `parse` makes a line's value a
    `V` (None: not one's shape, ignored), `form` makes a `V` a line's value."""

    def __init__(self, lines: CheckedLines, parse: Callable[[str], V | None], form: Callable[[V], str]) -> None:
        self.lines, self.path = lines, lines.path
        self._parse, self._form = parse, form
        self._values: dict[str, V] | None = None

    def get(self, key: str) -> V | None:
        if self._values is None:
            found = ((key, self._parse(value)) for key, value in self.lines.values().items())
            self._values = {key: value for key, value in found if value is not None}
        return self._values.get(key)

    def put(self, key: str, value: V) -> None:
        """Remember `value` (best effort: a cache that cannot be written is no cache); a key with a
        tab or a line break is not kept."""
        if self.get(key) == value or "\t" in key or "\n" in key:
            return
        assert self._values is not None
        self._values[key] = value
        self.lines.append(key, self._form(value))


class CountCache(CheckedCache[Counts]):
    """Counts of rows by the digest of their content, for one tokenizer, in the user cache folder
    (`default_cache_dir() / token-counts / <tokenizer key>.tsv`, a `CheckedLines` file, compacted
    as it says); loaded on first use."""

    def __init__(self, tokenizer_spec: str, directory: str | os.PathLike | None = None) -> None:
        self.key = tokenizer_key(tokenizer_spec)
        self.folder = Path(directory) if directory is not None else default_cache_dir() / COUNTS_FOLDER
        super().__init__(CheckedLines(self.folder / f"{self.key}.tsv", self.key), _counts_of, counts_value)
        self.lock_path = self.lines.lock_path

    def compact(self, *, only_if_due: bool = False) -> bool:
        """See `CheckedLines.compact`."""
        return self.lines.compact(only_if_due=only_if_due)


class RowCounts:
    """Where a reader takes one file's rows' counts from: the sealed sidecar (by row), then the
    cache (by digest, unless `cache` is False: `--no-cache`); `put` records what it had to count."""

    def __init__(
        self,
        path: str | os.PathLike,
        tokenizer_spec: str,
        *,
        data_sha256: str | None = None,
        cache: bool = True,
        cache_dir: str | os.PathLike | None = None,
    ) -> None:
        self.tokenizer_spec = tokenizer_spec
        self.sidecar = SidecarCounts(path, tokenizer_spec, data_sha256)
        self.cache = CountCache(tokenizer_spec, cache_dir) if cache else None

    def get(self, row: int, digest: str) -> Counts | None:
        found = self.sidecar.get(row)
        if found is None and self.cache is not None:
            found = self.cache.get(digest)
        return found

    def put(self, digest: str, counts: Counts) -> None:
        if self.cache is not None:
            self.cache.put(digest, counts)


# -- counting on every core -----------------------------------------------------------------

T = TypeVar("T")


def count_texts(tokenizer_spec: str, texts: Sequence[str]) -> list[int]:
    """Counts of `texts` (a worker's job)."""
    from ._tokens import count_tokens_batch

    return count_tokens_batch(texts, num_threads=1, tokenizer=tokenizer_spec)


@lru_cache(maxsize=1)
def _counting_pool() -> ProcessPoolExecutor | None:
    """This process's counting processes, one per core; None on one core (counting in-process is
    then as fast) or when the main script's call is unguarded (workers would run it again).
    Started by the fork server (o200k built once, there), never by fork: a reader runs beside
    other threads. They end the moment this process does, however it ends."""
    import multiprocessing
    import sys

    from .engines._base import available_cores, warn_if_unguarded_main
    from .engines._local import _die_with_caller, ensure_fork_server

    cores = available_cores()
    if cores < 2 or warn_if_unguarded_main("tokens are counted in this process"):
        return None
    if sys.platform.startswith("linux"):
        context = multiprocessing.get_context("forkserver")
        ensure_fork_server(["mrcr_gen._counts", "mrcr_gen._preload_o200k"])
    else:
        context = multiprocessing.get_context("spawn")
    # Only this process holds the write end: the workers end when it does.
    reader, writer = context.Pipe(duplex=False)
    _CALLER_ALIVE.append(writer)
    return ProcessPoolExecutor(cores, mp_context=context, initializer=_die_with_caller, initargs=(reader,))


_CALLER_ALIVE: list = []  # the write end of the counting processes' pipe, held for this process's life


# A forked child has none of its parent's processes: it starts its own pool when it needs one.
os.register_at_fork(after_in_child=_counting_pool.cache_clear)


#: Text counted in the reading thread before the counting processes start (about 0.1 s of one core,
#: less than their start costs, which blocks the reader: the fork server builds the tokenizer).
INLINE_CHARS = 2_000_000


def counted_in_order(
    rows: Iterator[T],
    texts_of: Callable[[T], Sequence[str] | None],
    tokenizer_spec: str,
    ahead: int | None = None,
) -> Iterator[tuple[T, list[int] | None]]:
    """Each of `rows` with the counts of `texts_of(row)` (None: nothing to count), in order.

    The counting runs in the counting processes (every core), up to `ahead` rows ahead of the
    row yielded; the first row, and the rows up to `INLINE_CHARS` characters of text, are counted
    here: the first is then never later than counting it alone, and a small job never waits for
    the processes to start.
    """
    pending: deque[tuple[T, Sequence[str] | None, Future[list[int]] | list[int] | None]] = deque()
    limit = ahead if ahead is not None else 2 * (os.cpu_count() or 1)
    inline = 0  # characters counted here so far
    try:
        for row in rows:
            texts = texts_of(row)
            counted: Future[list[int]] | list[int] | None = None
            if texts is not None:
                pool = _counting_pool() if inline and inline >= INLINE_CHARS else None
                if pool is None:
                    inline += max(1, sum(map(len, texts)))  # not 0 after the first row
                counted = (
                    count_texts(tokenizer_spec, texts)
                    if pool is None
                    else pool.submit(count_texts, tokenizer_spec, texts)
                )
            pending.append((row, texts, counted))
            while pending and (len(pending) > limit or _ready(pending[0][2])):
                yield _resolved(pending.popleft(), tokenizer_spec)
    except Exception:
        while pending:  # the rows read before the source broke come first
            yield _resolved(pending.popleft(), tokenizer_spec)
        raise
    while pending:
        yield _resolved(pending.popleft(), tokenizer_spec)


def _ready(counted: Future[list[int]] | list[int] | None) -> bool:
    return not isinstance(counted, Future) or counted.done()


def _resolved(
    entry: tuple[T, Sequence[str] | None, Future[list[int]] | list[int] | None], tokenizer_spec: str
) -> tuple[T, list[int] | None]:
    row, texts, counted = entry
    if not isinstance(counted, Future):
        return row, counted
    try:
        return row, counted.result()
    except BrokenProcessPool:  # a counting process was killed (out of memory?): new ones next time
        _counting_pool.cache_clear()
        assert texts is not None
        return row, count_texts(tokenizer_spec, texts)
