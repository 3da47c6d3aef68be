"""Imported by the process pool's fork server so every worker starts with o200k loaded (and
shares its pages copy-on-write instead of each loading its own copy)."""

from __future__ import annotations

from .._tokens import o200k, token_counter
from ._checks import _check_row_task  # noqa: F401  (imported so workers start warm)


def init_worker() -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    token_counter()


o200k()
token_counter()
