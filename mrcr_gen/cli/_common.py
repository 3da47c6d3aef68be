"""What every command shares: one-line errors, exit codes, a stderr console."""

from __future__ import annotations

import sys

import click
import typer
from rich.console import Console

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2

stderr = Console(stderr=True)


class CommandError(Exception):
    """A problem with the user's input: printed as one line, exit code 2 unless given."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def run_app(app: typer.Typer, prog_name: str, args: list[str] | None = None) -> None:
    """Run a typer app; usage errors and CommandError become `prog: error: ...` and exit 2."""
    command = typer.main.get_command(app)
    try:
        code = command.main(args=args, prog_name=prog_name, standalone_mode=False)
    except click.UsageError as exc:
        print(f"{prog_name}: error: {exc.format_message()}", file=sys.stderr)
        sys.exit(EXIT_USAGE)
    except CommandError as exc:
        print(f"{prog_name}: error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        print(f"{prog_name}: error: {exc.format_message()}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except (click.Abort, KeyboardInterrupt):
        print(f"{prog_name}: interrupted", file=sys.stderr)
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else EXIT_OK)
