"""The public functions that take any recipe's files, bound to the registry (`mrcr_gen.recipes.RECIPES`).

The recipe-neutral layers (`mrcr_gen.eval`) take the recipes as an argument; these are what
`mrcr_gen` exports and the commands call, so users never pass them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from rich.console import Console

from ._ownership import UnclaimedFile
from ._tokens import DEFAULT_TOKENIZER
from .eval import _batch, _batchfile, _compare, _items, _report, _run_view, _runner
from .eval._config import EvalConfig
from .eval._fit import TooLong
from .eval._items import EvalItem
from .eval._runner import RunStats
from .eval._view import ViewReport
from .pool._harvest import HarvestedPair, HarvestReport
from .pool._quality import QualityReport
from .recipes import RECIPES, recipe_claiming
from .validate import ValidationReport
from .validate._health import HealthComparison

RECIPES_REFERENCE = "the benchmarks' own writings (the recipes' catalogs)"


def read_items(
    path: str | os.PathLike, *, tokenizer_spec: str = "o200k_base", skip: Callable[[int, str], bool] | None = None
) -> Iterator[EvalItem]:
    """The items of one data file, whatever its recipe; FileError for an unreadable file."""
    return _items.read_items(path, recipes=RECIPES, tokenizer_spec=tokenizer_spec, skip=skip)


async def run_eval_async(config: EvalConfig, **options: Any) -> RunStats:
    """Evaluate (see `mrcr_gen.eval.run_eval_async` for `options`); writes results.jsonl and run.json."""
    return await _runner.run_eval_async(config, recipes=RECIPES, **options)


def run_eval(config: EvalConfig, *, api_key: str | None = None) -> tuple[RunStats, dict]:
    """Run (or resume) an evaluation, then write summary.json and plot.png; returns (stats, summary)."""
    return _runner.run_eval(config, recipes=RECIPES, api_key=api_key)


async def run_batch_async(config: EvalConfig, **options: Any) -> _batch.BatchStats:
    """Evaluate through the OpenAI Batch API (see `mrcr_gen.eval.run_batch_async` for `options`);
    writes results.jsonl, run.json and RUN_DIR/batches/."""
    return await _batch.run_batch_async(config, recipes=RECIPES, **options)


def export_batch(
    config: EvalConfig, output: str | os.PathLike, *, too_long: Sequence[TooLong] | None = None
) -> _batchfile.ExportStats:
    """Write the batch input file (OpenAI's format, `custom_id` = row digest) of the rows `config` selects."""
    return _batchfile.export_requests(config, output, recipes=RECIPES, too_long=too_long)


def import_batch(config: EvalConfig, results: str | os.PathLike, **options: Any) -> _batchfile.ImportStats:
    """Grade a batch output file (OpenAI's or `vllm run-batch`'s) into the run folder `config.out`."""
    return _batchfile.import_results(config, results, recipes=RECIPES, **options)


def preflight(
    config: EvalConfig, api_key: str | None = None, on_row: Callable[[], None] | None = None
) -> list[TooLong]:
    """The rows whose prompt exceeds `config.max_context_window` as `config` counts them."""
    return _runner.preflight(config, api_key, on_row, recipes=RECIPES)


def summarize_run(run_dir: str | os.PathLike) -> dict[str, Any]:
    """The summary of RUN_DIR (results.jsonl and run.json), without writing anything."""
    return _report.summarize(run_dir, recipes=RECIPES)


def write_report(run_dir: str | os.PathLike) -> dict[str, Any]:
    """Write RUN_DIR/summary.json and RUN_DIR/plot.png; return the summary."""
    return _report.write_report(run_dir, recipes=RECIPES)


def print_report(summary: dict[str, Any], console: Console | None = None) -> None:
    """The summary's table, then each recipe's own tables."""
    _report.print_report(summary, console, recipes=RECIPES)


def add_analyses(run_dir: str | os.PathLike) -> int:
    """Give the scored rows of a run made by an earlier version their failure analysis; how many."""
    return _run_view.add_analyses(run_dir, recipes=RECIPES)


def run_view(run_dir: str | os.PathLike) -> ViewReport:
    """The HTML report of a run folder (`mrcr_gen.eval.render_view` renders it)."""
    return _run_view.run_view(run_dir, recipes=RECIPES)


def graded_view(
    data: str | os.PathLike,
    responses: dict[int, str],
    result: dict[str, Any],
    *,
    cache: bool = True,
    items: dict[int, EvalItem] | None = None,
) -> ViewReport:
    """The HTML report (`mrcr-grade --html`) of the `result` of `grade_responses` (`cache`: as it
    was given). `items`: the dict given to `grade_responses` as its `items`, holding the graded rows:
    the page shows them as they are, and reads (and counts) only the rows it lacks from DATA."""
    return _run_view.graded_view(data, responses, result, recipes=RECIPES, cache=cache, items=items)


def compare_runs(run_dirs: Sequence[str | os.PathLike]) -> list[dict[str, Any]]:
    """One entry per run: its model, settings, means, AUC and per-bin means (`mrcr-eval compare`)."""
    return _compare.compare_runs(run_dirs, recipes=RECIPES)


def grade_responses(
    data: str | os.PathLike,
    responses: str | os.PathLike | dict[int, str],
    *,
    allow_missing: bool = False,
    cache: bool = True,
    items: dict[int, EvalItem] | None = None,
) -> dict[str, Any]:
    """Grade replies (a RESPONSES.jsonl file, or row -> reply) against DATA with the grader of the
    recipe that owns DATA: exactly what `mrcr-grade DATA RESPONSES --json` prints. Every recipe
    gives `mean`, `n_rows`, `missing`, `rows` (`row`, `score`, `bin`, `n_needles`) and `cells`
    (per bin and needle count); the core's grading (openai/mrcr, and any recipe that does not
    grade its own way) adds each row's failure `analysis` and their `failures`; MRCR v2 adds each
    row's `score_lenient`, `context_len` and floors, and its `report` (Google's summary numbers).
    Every row needs one reply unless `allow_missing`.

    `cache` False (`--no-cache`): the rows' token counts neither read from nor added to the count
    cache. `items`, when given, receives each graded row's item, for `graded_view`.
    RequestError, one line, for replies that do not match DATA, a row that cannot be graded, a
    file that cannot be read or an option the recipe's grader cannot honour; UnclaimedFile for
    a file no recipe owns."""
    from ._errors import RequestError

    recipe = recipe_claiming(data)
    options: dict[str, Any] = {"allow_missing": allow_missing}
    if not cache:
        if not _items.takes_keyword(recipe.grade_responses, "cache"):
            raise RequestError(f"--no-cache: the {recipe.name} recipe's grader cannot skip the count cache")
        options["cache"] = False
    if items is not None and _items.takes_keyword(recipe.grade_responses, "items"):
        options["items"] = items  # (a plugin's grader made before `items`: `graded_view` reads its rows)
    return recipe.grade_responses(data, responses, **options)


def harvest(
    paths: Sequence[str | os.PathLike],
    out: str | os.PathLike,
    *,
    on_row: Callable[[], None] | None = None,
    tokenizer: str = DEFAULT_TOKENIZER,
) -> HarvestReport:
    """Write every distinct (ask, writing) pair of MRCR files to a pool, and the catalog found
    beside it (`<pool>.catalog.json`); each writing counted with `tokenizer`. Each file is read by
    the recipe that claims it: openai/mrcr parquet (asks as they are) and MRCR v2 CSV or parquet
    (asks `Write a {format} about {topic} in {style} style.` kept as `write a {format} about
    {topic} in {style} style`). PoolError, with nothing written, for a file that is not an MRCR
    file (naming what is wrong: missing columns, ...) or when the pool would be empty; an input
    with no rows is otherwise listed in the report's `empty_files`."""
    from .pool import PoolError
    from .pool._harvest import harvest_files

    def rows_of(path: str | os.PathLike) -> Iterator[list[HarvestedPair | None]]:
        try:
            recipe = recipe_claiming(path)
        except UnclaimedFile as exc:
            raise PoolError(str(exc)) from None
        return recipe.harvest_rows(path)

    report = harvest_files(paths, out, rows_of, on_row=on_row, tokenizer=tokenizer)
    pool_quality(out)
    return report


def pool_quality(pool: str | os.PathLike, compare: str | os.PathLike | None = None) -> QualityReport:
    """Write a pool's quality report beside it (`<pool>.quality.json`) and return it: per format its
    writings' tokens beside the recipes' reference figures (or those of the pool `compare`),
    duplicates, and the empty, refusing and off-ask replies it keeps out of needle slots."""
    from .pool._quality import write_quality_report

    reference = {name: figures for recipe in RECIPES for name, figures in recipe.writing_reference().items()}
    return write_quality_report(pool, reference, RECIPES_REFERENCE, compare=compare)


def health_report(
    data: Sequence[str | os.PathLike],
    reference: Sequence[str | os.PathLike],
    *,
    tokens: bool = True,
    workers: int | None = None,
    tokenizer: str | None = None,
) -> tuple[HealthComparison, ValidationReport]:
    """`mrcr-validate DIR --compare REF`: the health statistics of both sets (one recipe's files each,
    the same recipe), and DIR's validation. RequestError (one line) for inputs that cannot be compared:
    files of several recipes or of another recipe than DIR's, a file no recipe owns, an unreadable
    file or one with no rows."""
    from ._errors import RequestError
    from .recipes import group_inputs
    from .validate._health import dataset_health

    sides = []
    for label, paths in (("DIR", data), ("--compare", reference)):
        groups = group_inputs(paths)
        if len(groups) != 1:
            kinds = " and ".join(f"{recipe.title} files" for recipe, _ in groups) or "no data file"
            raise RequestError(f"{label} {' '.join(map(str, paths))}: {kinds}; compare one recipe's files")
        sides.append(groups[0])
    (mine, _), (theirs, _) = sides
    if mine.name != theirs.name:
        raise RequestError(
            f"--compare {' '.join(map(str, reference))}: {theirs.title} files, but DIR holds {mine.title} files"
        )
    results = []
    for recipe, inputs in sides:
        try:
            health, report = dataset_health(
                recipe.checking(), inputs, recipe=recipe.name, tokens=tokens, workers=workers, tokenizer=tokenizer
            )
        except ValueError as exc:
            raise RequestError(str(exc)) from None
        if report.unreadable:
            first = report.unreadable[0]
            raise RequestError(f"{first.file}: {first.message}")
        results.append((health, report))
    return HealthComparison(data=results[0][0], reference=results[1][0]), results[0][1]
