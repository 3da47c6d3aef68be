"""`mrcr-eval export-inspect RUN_DIR -o FILE.eval`: a run directory as an Inspect log.

Nothing here imports inspect_ai at module level: the default install never loads it."""

from __future__ import annotations

from pathlib import Path

import typer

from ._common import CommandError, stderr

export_app = typer.Typer(
    add_completion=False,
    help="Write a mrcr-eval run directory as an Inspect log (read by inspect_ai.log.read_eval_log, shown by "
    "`inspect view`). Needs the [inspect] extra.",
)


def _needs_inspect() -> None:
    try:
        import inspect_ai  # noqa: F401
    except ImportError:
        raise CommandError("Inspect logs need inspect_ai: pip install 'mrcr-gen[inspect]'") from None


@export_app.command()
def export_inspect(
    run_dir: Path = typer.Argument(..., help="A mrcr-eval run directory."),
    out: Path = typer.Option(..., "--out", "-o", help="The Inspect log to write: FILE.eval (or FILE.json)."),
    include_input: bool = typer.Option(
        True, "--input/--no-input", help="Store each row's messages as the sample's input (large for long bins)."
    ),
) -> None:
    _needs_inspect()
    from ..inspect._export import ExportError, export_run

    try:
        written = export_run(run_dir, out, include_input=include_input)
    except ExportError as exc:
        raise CommandError(str(exc)) from None
    except OSError as exc:
        raise CommandError(f"cannot write {out}: {exc.strerror or exc}") from None
    stderr.print(f"wrote {written}", highlight=False)
