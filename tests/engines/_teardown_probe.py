"""Imported by a process that tests/engines/test_fork_server_exit.py starts: it writes the file that
MRCR_TEARDOWN_PROBE names when the importing process tears its modules down at exit."""

from __future__ import annotations

import os


class _Witness:
    # What __del__ needs is bound now: late in an interpreter's teardown, module globals are gone.
    def __del__(self, path: str = os.environ["MRCR_TEARDOWN_PROBE"], os=os) -> None:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        os.write(descriptor, b"torn down\n")
        os.close(descriptor)


WITNESS = _Witness()
