"""`mrcr-validate`: re-check MRCR parquet files row by row."""

from __future__ import annotations

import sys
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import typer
from rich.console import Console, JustifyMethod
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from .._request import ValidateRequest
from ..recipes import group_inputs

if TYPE_CHECKING:
    from ..validate import RepairResult, ValidationReport
    from ..validate._shortcuts import ShortcutReport

from ._common import NO_CACHE_HELP, TOKENIZER_HELP, CommandError, checked_tokenizer, open_engine, run_app

PROG = "mrcr-validate"

app = typer.Typer(
    add_completion=False,
    help=(
        "Re-check MRCR files row by row: openai/mrcr parquet, and MRCR v2 CSV or parquet (column 'queries'). "
        "Exit code 0: no row has an error (warnings allowed); 1: some row or file has an error; 2: an input "
        "could not be read or the usage is wrong. The input files are never modified."
    ),
)


def _err_line(message: str) -> None:
    print(f"{PROG}: error: {message}", file=sys.stderr)


def _progress(console: Console) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("rows"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    )


def _summary_tables(report: ValidationReport, console: Console, max_findings: int) -> None:

    s = report.summary
    table = Table(title="mrcr-validate summary", show_header=False)
    table.add_row("files", str(s.files))
    table.add_row("rows checked", str(s.rows))
    table.add_row("rows with errors", f"[{'red' if s.rows_with_errors else 'green'}]{s.rows_with_errors}")
    console.print(table)
    if s.by_check:
        checks = Table(title="findings per check")
        checks.add_column("check")
        checks.add_column("errors", justify="right")
        checks.add_column("warnings", justify="right")
        errors: dict[str, int] = {}
        warnings: dict[str, int] = {}
        for f in report.findings:
            (errors if f.is_error else warnings)[f.check] = (errors if f.is_error else warnings).get(f.check, 0) + 1
        for name in s.by_check:
            checks.add_row(name, str(errors.get(name, 0)), str(warnings.get(name, 0)))
        console.print(checks)
    if s.by_bin:
        needles = sorted(
            {n for counts in s.by_bin.values() for n in counts}, key=lambda n: (not n.isdigit(), n.zfill(6))
        )
        bins = Table(title="rows per token bin x needles")
        bins.add_column("bin")
        for n in needles:
            bins.add_column(f"{n} needles", justify="right")
        for label, counts in s.by_bin.items():
            bins.add_row(label, *(str(counts.get(n, 0)) for n in needles))
        console.print(bins)
    if s.shortcuts is not None:
        _shortcut_table(s.shortcuts, console)
    if report.findings:
        shown = report.findings[:max_findings]
        findings = Table(title=f"findings ({len(report.findings)})")
        for column in ("file", "row", "check", "severity", "message"):
            findings.add_column(column, overflow="fold")
        for f in shown:
            colour = "red" if f.is_error else "yellow"
            findings.add_row(
                f.file, "-" if f.row is None else str(f.row), f.check, f"[{colour}]{f.severity}", f.message
            )
        console.print(findings)
        if len(report.findings) > len(shown):
            console.print(f"… and {len(report.findings) - len(shown)} more findings (see --json or --max-findings)")


def _shortcut_table(shortcuts: ShortcutReport, console: Console) -> None:
    from rich import box

    # Fits 80 columns (a pipe's width) with the widest bin and probe names: no cell wraps.
    table = Table(
        title="shortcut probes: mean official score per bin x needles",
        caption="n: needles; expect: the score under uniform placement; floor: a random writing's",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
    )
    for column in ("bin", "n", "probe", "rows", "score", "expect", "excess", "z", "floor"):
        table.add_column(column, justify="left" if column in ("bin", "probe") else "right", no_wrap=True)
    for g in shortcuts.groups:
        flag = "[red]" if g.shortcut else ""
        floor = "-" if g.floor is None else f"{g.floor:.3f}"
        excess = f"{flag}{g.observed - g.expected:+.3f}"
        table.add_row(
            g.bin,
            g.n_needles,
            g.probe,
            str(g.rows),
            f"{g.observed:.3f}",
            f"{g.expected:.3f}",
            excess,
            f"{g.z:.1f}",
            floor,
        )
    console.print(table)
    if shortcuts.skipped:
        skipped = ", ".join(f"{count} ({reason})" for reason, count in shortcuts.skipped.items())
        console.print(f"rows not probed: {skipped}")


def _compare(
    paths: list[str],
    reference: str,
    tokens: bool,
    workers: int | None,
    tokenizer: str | None,
    json_out: str | None,
    quiet: bool,
) -> int:
    """`--compare REF`: both sets' health statistics side by side; DIR's validation decides the exit code."""
    from .._api import health_report
    from ..validate._health import health_table

    comparison, report = health_report(paths, [reference], tokens=tokens, workers=workers, tokenizer=tokenizer)
    if json_out is not None:
        _write_json(json_out, comparison.model_dump_json(indent=2))
    if not quiet:
        console = Console(stderr=True) if json_out == "-" else Console()
        console.print(health_table(comparison, str(paths[0] if len(paths) == 1 else "DIR"), reference))
    return report.exit_code


def _write_json(json_out: str, text: str) -> None:
    if json_out == "-":
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
        return
    try:
        from .._files import write_text_atomic

        write_text_atomic(json_out, text + "\n")
    except OSError as exc:
        raise CommandError(f"cannot write --json {json_out}: {exc}") from None


def _repair_table(result: RepairResult, console: Console, verb: str) -> None:
    if not result.files:
        return
    table = Table(title=f"{verb}: rows per file")
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("input", "left"),
        ("output", "left"),
        ("kept", "right"),
        ("fixed", "right"),
        ("dropped", "right"),
    )
    for column, justify in columns:
        table.add_column(column, justify=justify, overflow="fold")
    for f in result.files:
        table.add_row(f.input, f.output or "[red]not written", str(f.kept), str(f.fixed), str(f.dropped))
    console.print(table)
    console.print(
        f"{verb}: wrote {result.kept + result.fixed} rows to {result.output} "
        f"({result.kept} kept, {result.fixed} fixed, {result.dropped} dropped)"
    )


@app.command()
def validate(
    paths: list[str] = typer.Argument(
        ...,
        help=(
            "Parquet files, MRCR v2 CSV files, directories (every *.parquet below, and every MRCR v2 *.csv: a header "
            "with 'queries' and 'answer'), globs or hf://datasets/ORG/NAME[@REV]/PATH-or-GLOB."
        ),
        show_default=False,
    ),
    workers: int | None = typer.Option(
        None,
        "--workers",
        "-w",
        min=1,
        help=(
            "Processes for the checks and token recount [default: chosen from the data's size, at most all cores]. "
            "Findings are identical for every value."
        ),
    ),
    engine: str = typer.Option(
        "local",
        "--engine",
        help=(
            "local: a process pool on this machine; ray: Ray tasks, each reading its own rows (pip install "
            "'mrcr-gen[ray]'); inputs must then be on a filesystem every node sees."
        ),
    ),
    address: str | None = typer.Option(
        None,
        "--address",
        help=(
            "--engine ray: the cluster to join (default $RAY_ADDRESS, else a local Ray instance on this machine's "
            "cores)."
        ),
    ),
    tokens: bool = typer.Option(True, "--tokens/--no-tokens", help="Recount tokens to check the bins (the slow part)."),
    json_out: str | None = typer.Option(
        None,
        "--json",
        metavar="FILE",
        help="Write the report as JSON to FILE ('-' for stdout: stdout then holds the JSON alone).",
    ),
    clean: Path | None = typer.Option(
        None,
        "--clean",
        metavar="OUT",
        help=(
            "Write the rows with no error to OUT: a file for one input file, else a folder with one file per input "
            "(its own columns, its path below the inputs' common folder). Atomic; every dropped row is listed."
        ),
    ),
    fix: Path | None = typer.Option(
        None,
        "--fix",
        metavar="OUT",
        help="Like --clean, plus rows whose ground truth is recoverable from the prompt, rewritten.",
    ),
    strict: bool = typer.Option(
        False, "--strict", help="Count warnings as errors: exit code 1, and --clean/--fix drop their rows."
    ),
    max_findings: int = typer.Option(
        50, "--max-findings", min=0, help="Findings shown in the table (all of them go to --json)."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No tables, only the exit code, error lines and --json."),
    tokenizer: str | None = typer.Option(
        None, "--tokenizer", help=TOKENIZER_HELP + " [default: the one the dataset card names, else o200k_base]"
    ),
    no_cache: bool = typer.Option(False, "--no-cache", help=NO_CACHE_HELP),
    compare: str | None = typer.Option(
        None,
        "--compare",
        metavar="REF",
        help=(
            "A health report of the inputs beside REF (official files or another generated set, of the same "
            "recipe): writing tokens per format, format shares, needle and target depth, trigram share, zlib ratio, "
            "the floors and the shortcut probes. See docs/validating.md."
        ),
    ),
    shortcuts: bool = typer.Option(
        False,
        "--shortcuts",
        help=(
            "Also run the shortcut probes: model-free solvers (the needle nearest depth (k-0.5)/n, the first, last, "
            "a random, the longest, the shortest needle, the final turn's writing) scored per bin and needle count "
            "beside their expectation under uniform needle placement; one that beats it clearly is an error "
            "'shortcut'. See docs/validating.md."
        ),
    ),
) -> int:
    from .._parquet import use_lean_memory_pool  # here, not at --help: it loads pyarrow
    from ..validate import RepairRefused, ValidationReport, merge_reports

    use_lean_memory_pool()  # before any worker starts: they take it from the environment
    if clean is not None and fix is not None:
        raise CommandError("--clean and --fix are exclusive; give one output")
    if shortcuts and (clean is not None or fix is not None):
        raise CommandError("--shortcuts writes nothing; run it without --clean/--fix")
    if tokenizer is not None:
        checked_tokenizer(tokenizer)
    if compare is not None:
        if clean is not None or fix is not None:
            raise CommandError("--compare writes nothing; run it without --clean/--fix")
        if strict or engine != "local" or address is not None:
            raise CommandError(
                "--compare runs on this machine and reports findings as they are: without --strict/--engine"
            )
        return _compare(paths, compare, tokens, workers, tokenizer, json_out, quiet)
    runner = open_engine(engine, workers, address) if engine != "local" or address is not None else None
    json_to_stdout = json_out == "-"
    console = Console(stderr=True) if json_to_stdout else Console()
    errors = Console(stderr=True)
    out = clean or fix

    with runner if runner is not None else nullcontext(), _progress(errors) as progress:
        tasks: dict[str, TaskID] = {}

        def advance(file: str, done: int, total: int | None) -> None:
            if file not in tasks:
                tasks[file] = progress.add_task(Path(file).name, total=total)
            progress.advance(tasks[file], done)

        groups = group_inputs(paths)
        mode: Literal["check", "clean", "fix"] = "fix" if fix is not None else "clean" if clean is not None else "check"
        if out is not None:
            for recipe, _ in groups:
                refusal = recipe.repair_refusal(mode)
                if refusal is not None:
                    raise CommandError(refusal)
            if len(groups) > 1:
                kinds = " or ".join(sorted(f"{recipe.title} files" for recipe, _ in groups))
                raise CommandError(f"--clean takes {kinds}, not both at once")
        if shortcuts:
            for recipe, _ in groups:
                if recipe.checking().probes is None:
                    raise CommandError(f"--shortcuts: {recipe.title} files (recipe {recipe.name}) declare no probes")
        request = ValidateRequest(
            tokens=tokens,
            workers=workers,
            engine=runner,
            strict=strict,
            tokenizer=tokenizer,
            cache=not no_cache,
            mode=mode,
            out=out,
            progress=advance,
            on_change=lambda line: errors.print(line, markup=False, highlight=False, soft_wrap=True),
            shortcuts=shortcuts,
        )
        try:
            results = [recipe.validate(inputs, request) for recipe, inputs in groups]
        except RepairRefused as exc:
            raise CommandError(str(exc)) from None
        report = results[0].report if results else ValidationReport()
        for more in results[1:]:
            report = merge_reports(report, more.report)
    for finding in report.unreadable:
        _err_line(f"{finding.file}: {finding.message}")
    if json_out is not None:
        _write_json(json_out, report.to_json())
    if not quiet:
        _summary_tables(report, console, max_findings)
        if out is not None and results:
            _repair_table(results[-1], console, "fixed" if fix is not None else "cleaned")
    return report.exit_code


def validate_main(argv: list[str] | None = None) -> None:
    """Console script `mrcr-validate`."""
    run_app(app, PROG, argv)


__all__ = ["app", "validate_main"]
