"""The error every command turns into one line for the user, and the exit codes scripts rely on
(2: bad input or usage; 1: some output failed). Low in the layers, so the core raises it too."""

from __future__ import annotations

EXIT_USAGE, EXIT_FAILED = 2, 1


class RequestError(Exception):
    """A problem with the user's request: printed as one line, exit code 2 unless given."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message, for a one-line error; its type's name when the
    message is empty."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__
