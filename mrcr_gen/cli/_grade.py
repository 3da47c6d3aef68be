"""`mrcr-grade DATA.parquet RESPONSES.jsonl`: the official grader over a file of responses."""

from __future__ import annotations

import glob
import json
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from .._bins import bin_sort_key
from ..recipes import recipe_claiming
from ._common import NO_CACHE_HELP, CommandError, data_inputs, print_warnings, run_app

app = typer.Typer(
    add_completion=False,
    help="Grade responses against an MRCR parquet file with the official grader. RESPONSES.jsonl "
    'holds one JSON object per line: {"row": <0-based row index in DATA>, "response": "..."}.',
)


def _table(result: dict) -> Table:
    needles = sorted({c["n_needles"] for c in result["cells"]})
    bins = sorted({c["bin"] for c in result["cells"]}, key=bin_sort_key)
    by_cell = {(c["bin"], c["n_needles"]): c for c in result["cells"]}
    table = Table(title="mean score by bin x needles (rows)")
    table.add_column("bin")
    for n in needles:
        table.add_column(f"{n} needles", justify="right")
    for label in bins:
        cells = [by_cell.get((label, n)) for n in needles]
        table.add_row(label, *(f"{c['mean']:.3f} ({c['count']})" if c else "-" for c in cells))
    return table


@app.command()
def grade(
    data: str = typer.Argument(
        ...,
        help=(
            "MRCR parquet file (openai/mrcr schema), an MRCR v2 CSV / parquet file, or a folder, glob or "
            "hf://datasets/ORG/NAME[@REV]/PATH naming one such file."
        ),
    ),
    responses: Path = typer.Argument(..., help="JSONL file of {row, response} objects."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    allow_missing: bool = typer.Option(False, "--allow-missing", help="Grade only the rows that have a response."),
    html: Path | None = typer.Option(
        None, "--html", help="Also write one self-contained HTML report of the graded replies (see mrcr-eval view)."
    ),
    no_cache: bool = typer.Option(False, "--no-cache", help=NO_CACHE_HELP),
) -> None:
    if data.startswith("hf://") or Path(data).is_dir() or glob.has_magic(data):
        files = data_inputs([data], with_csv=True)
        if len(files) != 1:
            raise CommandError(f"{data} names {len(files)} files; mrcr-grade grades one")
        data = str(files[0])
    for path in (Path(data), responses):
        if not path.is_file():
            raise CommandError(f"file not found: {path}")
    from .._api import grade_responses

    items: dict | None = {} if html is not None else None  # the graded rows, for the page
    result = grade_responses(data, responses, allow_missing=allow_missing, cache=not no_cache, items=items)
    if html is not None:
        from .._api import graded_view
        from ..eval import read_responses, render_view, write_html

        try:
            report = graded_view(data, read_responses(responses), result, cache=not no_cache, items=items)
            print_warnings(report.warnings)
            write_html(render_view(report), html)
        except OSError as exc:
            raise CommandError(f"cannot write {html}: {exc.strerror or exc}") from None
    if as_json:
        print(json.dumps(result))
        return
    console = Console()
    lines, tables = recipe_claiming(data).grade_report(result)
    for line in lines:
        console.print(line)
    for table in [_table(result), *tables]:
        console.print(table)


def grade_main(args: list[str] | None = None) -> None:
    run_app(app, "mrcr-grade", args)
