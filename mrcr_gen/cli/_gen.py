"""`mrcr-gen`: generate MRCR datasets."""

from __future__ import annotations

import inspect
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from .._schemas import export_schemas, stale_schemas
from ..generate import GenerateRequest, GenOption
from ..recipes import RECIPES, recipe_named
from ._common import TOKENIZER_HELP, CommandError, generating_bar, stderr

app = typer.Typer(
    add_completion=False,
    no_args_is_help=False,
    help="Generate MRCR rows in the exact openai/mrcr parquet schema. Without options: 4 needles, "
    "every bin, 100 rows per bin, offline writer, written to ./mrcr-data. With --recipe mrcr-v2: "
    "Google DeepMind's MRCR v2 (8 needles, the buckets up to 1048576, CSV in ./mrcr-v2-data).",
)


#: The options every recipe shares, before and after the recipes' own (`GenOption`s), as `--help`
#: lists them: (parameter name, annotation, typer.Option).
HEAD_OPTIONS: tuple[tuple[str, Any, Any], ...] = (
    (
        "recipe",
        str,
        typer.Option(
            "openai-mrcr",
            "--recipe",
            help=(
                "openai-mrcr (parquet in the openai/mrcr schema) or mrcr-v2 (Google DeepMind's MRCR v2: one flat text "
                "per row, CSV or parquet)"
                + "".join(f"; {r.name} ({r.title})" for r in RECIPES if r.name not in ("openai-mrcr", "mrcr-v2"))
                + "."
            ),
        ),
    ),
    (
        "needles",
        list[int],
        typer.Option(
            [],
            "--needles",
            "-n",
            help="Needle count (repeatable); 2, 4 and 8 are the standard ones. (default 4; mrcr-v2: 8)",
            show_default=False,
        ),
    ),
    (
        "bins",
        list[str] | None,
        typer.Option(
            None,
            "--bin",
            "-b",
            show_default=False,
            help=(
                "Upper edge of a token bin (repeatable), e.g. 65536, or 'all' (default all; mrcr-v2: the buckets up "
                "to 1048576, 'all' goes on to 8388608)."
            ),
        ),
    ),
    ("samples", int, typer.Option(100, "--samples", "-s", min=1, help="Rows per bin and needle count.")),
    ("seed", int, typer.Option(0, "--seed", help="Seed; the same command and seed give byte-identical files.")),
    (
        "out",
        Path | None,
        typer.Option(
            None,
            "--out",
            "-o",
            help="Output directory (default mrcr-data; mrcr-v2: mrcr-v2-data).",
            show_default=False,
        ),
    ),
    (
        "writer",
        str,
        typer.Option(
            "offline", "--writer", help="Source of writings: offline, pool (--pool PATH) or openai (--model M)."
        ),
    ),
)
TAIL_OPTIONS: tuple[tuple[str, Any, Any], ...] = (
    (
        "tokens",
        int | None,
        typer.Option(
            None,
            "--tokens",
            help=(
                "Target a token total instead of bins: every row within 1% below N (64 tokens below 6400), never "
                "above; N from 4160 to 1048576 (MRCR v2: 4161 to 8388608), so that every row lies in a bin. "
                "Not with --bin."
            ),
        ),
    ),
    (
        "shard",
        str,
        typer.Option("1/1", "--shard", help="Write only part K of N of the files, so N machines build one dataset."),
    ),
    (
        "overwrite",
        bool,
        typer.Option(
            False,
            "--overwrite",
            help=(
                "Replace what another generation (other options) wrote to --out: the files its card lists are "
                "removed first. Without it such a folder is refused; a rerun of the same command resumes."
            ),
        ),
    ),
    (
        "workers",
        int | None,
        typer.Option(
            None,
            "--workers",
            "-w",
            min=1,
            help=(
                "Processes (local engine) or local Ray CPUs [default: all cores]. Output is byte-identical for every "
                "value."
            ),
        ),
    ),
    (
        "engine",
        str,
        typer.Option(
            "local",
            "--engine",
            help=(
                "local: a process pool on this machine; ray: one Ray task per file or chunk of a large file (pip "
                "install 'mrcr-gen[ray]'); --out must then be on a filesystem every node sees."
            ),
        ),
    ),
    (
        "address",
        str | None,
        typer.Option(
            None,
            "--address",
            help=(
                "--engine ray: the cluster to join (default $RAY_ADDRESS, else a local Ray instance on this machine's "
                "cores)."
            ),
        ),
    ),
    (
        "tokenizer",
        str,
        typer.Option("o200k_base", "--tokenizer", help=TOKENIZER_HELP + " Rows are binned by its count."),
    ),
)


def recipe_options() -> dict[str, GenOption]:
    """Every recipe's own options by name, in registry order (an option two recipes declare once)."""
    found: dict[str, GenOption] = {}
    for recipe in RECIPES:
        for option in declared_options(recipe):
            found.setdefault(option.name, option)
    return found


def declared_options(recipe: Any) -> tuple[GenOption, ...]:
    """A recipe's own options (`GenerationRecipe.generation_options`)."""
    return tuple(recipe.generation_options)


def _typer_option(option: GenOption) -> Any:
    return typer.Option(option.default, *option.flags, help=option.help, min=option.min)


def _signature(func: Callable[..., None]) -> Callable[..., None]:
    """`func(ctx, **values)` with the command's options as its signature, so typer (and --help)
    sees the shared options and every recipe's declared ones."""
    declared = [(o.name, o.annotation, _typer_option(o)) for o in recipe_options().values()]
    parameters = [inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context)]
    annotations: dict[str, Any] = {"ctx": typer.Context, "return": None}
    for name, annotation, default in (*HEAD_OPTIONS, *declared, *TAIL_OPTIONS):
        parameters.append(
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)
        )
        annotations[name] = annotation
    func.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    func.__annotations__ = annotations
    return func


@app.callback(invoke_without_command=True)
@_signature
def generate(ctx: typer.Context, **values: Any) -> None:
    if ctx.invoked_subcommand is not None:
        return
    if values["tokens"] is not None and values["bins"]:
        raise CommandError("--tokens and --bin are exclusive: --tokens N replaces the bins with one token target")
    try:
        chosen = recipe_named(values["recipe"])
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    request = GenerateRequest(
        needles=tuple(values["needles"]),
        bins=tuple(values["bins"] or ()),
        tokens=values["tokens"],
        samples=values["samples"],
        seed=values["seed"],
        out=values["out"],
        shard=values["shard"],
        overwrite=values["overwrite"],
        tokenizer=values["tokenizer"],
        writer=values["writer"],
        workers=values["workers"],
        engine=values["engine"],
        address=values["address"],
        options=_chosen_options(ctx, chosen, values),
        command=shlex.join(["mrcr-gen", *sys.argv[1:]]),
        messages=stderr,
    )
    written = chosen.generate(request, generating_bar)
    table = Table(title=written.title)
    for column in written.columns:
        table.add_column(column, justify="right")
    for row in written.rows:
        table.add_row(*row)
    Console().print(table)


def _chosen_options(ctx: typer.Context, chosen: Any, values: dict[str, Any]) -> dict[str, Any]:
    """The chosen recipe's own options; one given that it does not declare is refused."""
    own = {option.name for option in declared_options(chosen)}
    for name, option in recipe_options().items():
        source = ctx.get_parameter_source(name)
        given = source is not None and source.name != "DEFAULT"  # typed on the command line (or from the environment)
        if given and name not in own:
            raise CommandError(f"{option.flag} is not an option of --recipe {chosen.name}")
    return {name: values[name] for name in own}


@app.command()
def schemas(
    out: Path = typer.Option(Path("schemas"), "--out", "-o", help="Directory for the *.schema.json files."),
    check: bool = typer.Option(False, "--check", help="Only report schema files that are out of date (exit 1 if any)."),
) -> None:
    """Export the JSON Schema of every data model (the Pydantic models are the source of truth)."""
    if check:
        stale = stale_schemas(out, RECIPES)
        for name in stale:
            print(f"out of date: {out / name}")
        raise typer.Exit(1 if stale else 0)
    for path in export_schemas(out, RECIPES):
        print(path)
