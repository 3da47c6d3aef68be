"""`mrcr-grade DATA.parquet RESPONSES.jsonl`: the official grader over a file of responses."""

from __future__ import annotations

import glob
import json
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from .._api import grade_responses
from .._bins import bin_sort_key
from ..eval._items import FileError
from ..eval._responses import ResponsesError, read_responses
from ..recipes.mrcr_v2._rows import is_v2_file
from ._common import CommandError, parquet_inputs, run_app

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
) -> None:
    if data.startswith("hf://") or Path(data).is_dir() or glob.has_magic(data):
        files = parquet_inputs([data], v2_csv=True)
        if len(files) != 1:
            raise CommandError(f"{data} names {len(files)} files; mrcr-grade grades one")
        data = str(files[0])
    for path in (Path(data), responses):
        if not path.is_file():
            raise CommandError(f"file not found: {path}")
    if is_v2_file(data):
        return _grade_v2(Path(data), responses, as_json, allow_missing)
    try:
        result = grade_responses(data, responses, allow_missing=allow_missing)
    except (ResponsesError, FileError) as exc:
        raise CommandError(str(exc)) from None
    except (OSError, ValueError) as exc:
        raise CommandError(f"cannot read {data}: {exc}".splitlines()[0]) from None
    if as_json:
        print(json.dumps(result))
        return
    console = Console()
    mean = "-" if result["mean"] is None else f"{result['mean']:.4f}"
    console.print(f"mean score {mean} over {result['n_rows']} rows")
    if result["missing"]:
        console.print(f"{len(result['missing'])} rows had no response and were not graded")
    console.print(_table(result))


def _grade_v2(data: Path, responses: Path, as_json: bool, allow_missing: bool) -> None:
    """MRCR v2 files (column `queries`): grade_v2, per-bucket means and Google's summary numbers."""
    from ..recipes.mrcr_v2._eval import grade_v2_responses, render_v2_table

    try:
        result = grade_v2_responses(data, read_responses(responses), allow_missing=allow_missing)
    except (ResponsesError, ValueError, OSError) as exc:
        raise CommandError(str(exc).splitlines()[0]) from None
    if as_json:
        print(json.dumps(result))
        return
    console = Console()
    mean = "-" if result["mean"] is None else f"{result['mean']:.4f}"
    console.print(f"MRCR v2: mean score {mean} over {result['n_rows']} rows (grade_v2, strict)")
    console.print(_table(result))
    console.print(render_v2_table(result["report"]))


def grade_main(args: list[str] | None = None) -> None:
    run_app(app, "mrcr-grade", args)
