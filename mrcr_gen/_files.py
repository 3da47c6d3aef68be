"""Atomic file writing: a reader never sees a partial file, an interrupted run leaves none."""

from __future__ import annotations

import contextlib
import glob
import hashlib
import os
import secrets
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path
from typing import Any

#: (temporary, target) of each file finished while `publishing_deferred` is in effect, else None.
_deferred: list[tuple[str, str]] | None = None


@contextlib.contextmanager
def publishing_deferred() -> Iterator[list[tuple[str, str]]]:
    """Within: `atomic_path` leaves each finished file at its temporary path (written and synced)
    and notes (temporary, target) in the list yielded, instead of moving it into place. For a
    worker process: the process that runs the engine moves the files with `publish` when it takes
    the unit's result, so once that process is gone (even killed with SIGKILL) no file of its
    workers can appear, whenever they notice it. A worker's own check of its caller followed by
    the move would not do: the caller can die between the two. If the block fails, the files
    noted are removed."""
    global _deferred
    previous, _deferred = _deferred, []
    moves = _deferred
    try:
        yield moves
    except BaseException:
        discard(moves)
        raise
    finally:
        _deferred = previous


def publish(moves: Sequence[tuple[str, str]]) -> None:
    """Move files finished under `publishing_deferred` into place, in the order they were finished
    (a sidecar written last still lands last). If one cannot be moved, it and the rest are removed."""
    for done, (tmp, target) in enumerate(moves):
        try:
            os.replace(tmp, target)
        except BaseException:
            discard(moves[done:])
            raise


def discard(moves: Sequence[tuple[str, str]]) -> None:
    """Remove files finished under `publishing_deferred` that will not be put in place."""
    for tmp, _ in moves:
        Path(tmp).unlink(missing_ok=True)


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike, durable: bool = True) -> Iterator[Path]:
    """Yield a temporary path beside `target`; move it over `target` only if the block succeeds
    (under `publishing_deferred`, leave it for the caller of the engine to move). `durable=False`
    for scratch files removed within the run (a large file's parts, shared writings): no fsync,
    so the data need never reach the disk (fsyncing them cost generation seconds); whoever
    reuses one after a crash checks it is whole (`read_arrow_rows`)."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(6)}.partial")
    # Not mkstemp: its files are 0600, which the rename would give every dataset file; created
    # here with 0666, the umask decides, as for any other file the user writes.
    os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    try:
        yield tmp
        if durable:
            with open(tmp, "rb") as written:
                os.fsync(written.fileno())  # the data is on disk before the name points at it
        if _deferred is not None:
            _deferred.append((str(tmp), str(target)))  # the engine's caller moves it (`publish`)
        else:
            os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


class EarlyWriteback:
    """Writes a growing file's data to the disk in the background, a step behind its writer, so
    that the fsync making it durable when it is finished (`atomic_path`) has little left to wait
    for: the file of 100 rows of the 1M bin is 132 MB, which a fsync at its end wrote in about 0.1 s,
    the last thing `mrcr-gen` waited for. At most one sync runs at a time; its errors are raised by
    the next `nudge` or by `wait` (the final fsync would meet them too)."""

    def __init__(self, fileno: int) -> None:
        self._fileno = fileno
        self._running: Future | None = None

    def nudge(self) -> None:
        """Sync what has been written so far, unless a sync is still running."""
        if self._running is not None and not self._running.done():
            return
        self.wait()
        self._running = _writeback_thread().submit(getattr(os, "fdatasync", os.fsync), self._fileno)

    def wait(self) -> None:
        """Until the running sync is done (call it before the file is closed)."""
        running, self._running = self._running, None
        if running is not None:
            running.result()


@lru_cache(maxsize=1)
def _writeback_thread() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="mrcr-writeback")


# A forked child has none of its parent's threads: it starts its own when it needs one.
os.register_at_fork(after_in_child=_writeback_thread.cache_clear)


def finished_path(target: str | os.PathLike) -> Path:
    """Where the file `target`, just finished by `atomic_path`, is now: its temporary path while
    `publishing_deferred` holds it back, else `target` itself."""
    if _deferred is not None:
        for tmp, final in reversed(_deferred):
            if final == str(Path(target)):
                return Path(tmp)
    return Path(target)


def remove_partials(target: str | os.PathLike) -> None:
    """Remove what `atomic_path` writers of `target` left when their process died (killed, out of
    memory, node lost): call it only when no writer of `target` can still be running."""
    target = Path(target)
    for stale in target.parent.glob(f".{glob.escape(target.name)}.*.partial"):
        stale.unlink(missing_ok=True)


def remove_partials_in(folder: str | os.PathLike) -> None:
    """`remove_partials` of every file in `folder` (a large file's parts, say)."""
    for stale in Path(folder).glob(".*.partial"):
        stale.unlink(missing_ok=True)


def save_figure(figure: Any, path: str | os.PathLike) -> None:
    """A matplotlib figure laid out and written atomically as PNG."""
    figure.tight_layout()
    with atomic_path(path) as tmp:
        figure.savefig(tmp, format="png")


def write_text_atomic(target: str | os.PathLike, text: str, durable: bool = True) -> None:
    with atomic_path(target, durable) as tmp:
        tmp.write_text(text, encoding="utf-8")


def default_cache_dir() -> Path:
    """The user cache folder of mrcr-gen (writings, token counts): `$MRCR_GEN_CACHE`, else
    `$XDG_CACHE_HOME/mrcr-gen`, else `~/.cache/mrcr-gen`."""
    if os.environ.get("MRCR_GEN_CACHE"):
        return Path(os.environ["MRCR_GEN_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "mrcr-gen"


def file_sha256(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class ForeignFile(ValueError):
    """A file the command would overwrite or delete, which mrcr-gen did not write (one line for the
    user; nothing has been written when it is raised)."""

    def __init__(
        self, path: str | os.PathLike, hint: str = "move it away or choose another output", why: str = ""
    ) -> None:
        self.path = Path(path)
        super().__init__(f"refusing to overwrite {path}: {why or 'mrcr-gen did not write it'}; {hint}")


def is_lock_file(path: Path) -> bool:
    """Whether `path` is a lock file `exclusive_lock` made: empty, or the JSON of its last holder."""
    import json

    try:
        text = path.read_text(encoding="utf-8")
        return not text or {"pid", "host", "started"} <= set(json.loads(text))
    except (OSError, ValueError, TypeError):
        return False


class Busy(RuntimeError):
    """Another live process holds the lock; the message names it (pid, host, start)."""


@contextlib.contextmanager
def exclusive_lock(lock_file: str | os.PathLike, what: str) -> Iterator[None]:
    """Hold an OS lock (`fcntl.flock`) on `lock_file` for the body: one writer per output.

    The lock dies with its process (even on kill -9), so a crashed run never blocks the next
    one; the file itself only tells the refused process who holds it (pid, host, start). A
    second holder is refused at once with `Busy("<what> is in use by ...")`.
    """
    import fcntl
    import json
    import socket
    import time

    path = Path(lock_file)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise Busy(f"{what} is in use by {_holder(path)}; wait for it to end or choose another output") from None
        holder = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(holder) + "\n").encode("utf-8"), 0)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _holder(path: Path) -> str:
    """`pid N on HOST since START` from a lock file, or a plain phrase when it cannot be read yet."""
    import json

    try:
        holder = json.loads(path.read_text(encoding="utf-8"))
        return f"another run (pid {holder['pid']} on {holder['host']}, started {holder['started']})"
    except (OSError, ValueError, KeyError, TypeError):
        return "another run"
