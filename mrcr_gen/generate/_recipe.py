"""The generation part of a recipe (`GenerationRecipe`), what recipes usually share of it
(`GenerationDefaults`), and the flow every recipe's `mrcr-gen` runs (`generate_for`): options
checked, the recipe's job planned, an engine opened, the pipeline run, the summary returned."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Protocol, runtime_checkable

from .._budget import AssemblyError
from .._card import FolderTaken
from .._errors import EXIT_FAILED, RequestError
from .._files import ForeignFile
from ..engines import Engine, TaskFailed
from ._job import GenerationJob, GenerationResult
from ._options import GenOption, option_values
from ._request import Generated, GenerateRequest, ProgressBar, open_engine


@runtime_checkable
class GenerationRecipe(Protocol):
    """What a recipe supplies to generate: its options, its job (files with row specs, the builder
    that makes their rows and opens their files, its card text) and its summary table."""

    name: str
    #: The recipe's own version, recorded in the files it generates.
    version: str
    #: Whether every generation of the recipe on a local engine of 2 or more workers uses its pool,
    #: so that `mrcr-gen` may start the pool's fork server before it parses its options
    #: (`start_workers_early`). False for a recipe that runs some jobs in the command's process.
    workers_always_used: bool

    @property
    def generation_options(self) -> tuple[GenOption, ...]:
        """The recipe's own options of `mrcr-gen` (the shared ones are `GenerateRequest`'s fields)."""
        ...

    def worker_preload(self, request: GenerateRequest) -> tuple[str, ...]:
        """Modules a local engine's workers import before their first unit."""
        ...

    def plan_generation(self, request: GenerateRequest) -> GenerationJob:
        """The job `request` asks for (its writer chosen); RequestError for one it cannot meet."""
        ...

    def generation_summary(self, job: GenerationJob, result: GenerationResult) -> Generated: ...

    def generate(self, request: GenerateRequest, progress: ProgressBar) -> Generated: ...


class GenerationDefaults:
    """Defaults of the generation part: no options of its own, no preloads, a table of the files
    written, and `generate` through the core's flow. A recipe that generates supplies
    `plan_generation`."""

    name: str
    version: str = "1"
    workers_always_used: bool = False

    @property
    def generation_options(self) -> tuple[GenOption, ...]:
        return ()

    def worker_preload(self, request: GenerateRequest) -> tuple[str, ...]:
        return ()

    def plan_generation(self, request: GenerateRequest) -> GenerationJob:
        raise RequestError(f"--recipe {self.name} does not generate files")

    def generation_summary(self, job: GenerationJob, result: GenerationResult) -> Generated:
        rows: list[tuple[str, ...]] = [(file.relative_path, str(len(file.records))) for file in result.files]
        return Generated(title=f"Rows written to {job.out}", columns=("file", "rows"), rows=rows)

    def generate(self, request: GenerateRequest, progress: ProgressBar) -> Generated:
        return generate_for(self, request, progress)


def start_workers_early(recipe: GenerationRecipe, request: GenerateRequest) -> None:
    """Start the fork server of the local engine that `generate_for` would open for `request`, now:
    a command calls this before it has even parsed its options (a guess at them), so that the
    server imports the recipe's worker modules (a second of CPU, see `worker_preload`) on a core
    the command does not use while it starts, instead of after. A wrong guess costs that CPU and
    changes nothing else: the engine takes the running server as it is (`start_fork_server`). Only
    for a recipe whose local generations always use their pool (`workers_always_used`)."""
    from ..engines import available_cores
    from ..engines._local import start_fork_server

    workers = request.workers if request.workers is not None else available_cores()
    local_pool = request.engine == "local" and workers > 1 and sys.platform.startswith("linux")
    if local_pool and recipe.workers_always_used:
        start_fork_server(recipe.worker_preload(request))


def generate_for(recipe: GenerationRecipe, request: GenerateRequest, progress: ProgressBar) -> Generated:
    """Generate what `request` asks of `recipe`; RequestError for a request it cannot meet."""
    try:
        request = replace(request, options=option_values(recipe.generation_options, request.options, recipe.name))
    except ValueError as exc:
        raise RequestError(str(exc)) from None
    preload = recipe.worker_preload(request)
    # A local engine's workers start loading now, while the job is planned (Ray starts later: a
    # usage error must not wait for a cluster).
    early = (
        open_engine("local", request.workers, request.address, preload=preload) if request.engine == "local" else None
    )
    try:
        job = recipe.plan_generation(request)
        _check_folder(job, request)
        if early is None:  # before a cluster starts: a request it cannot meet must not wait for one
            _check(job, None, request)
        engine = early or open_engine(request.engine, request.workers, request.address, preload=preload)
        if early is not None:
            _check(job, early, request)
    except BaseException:
        if early is not None:
            early.close()
        raise
    with engine, progress(sum(len(f.rows) for f in job.files)) as advance:
        result = _run(job, engine, advance, request)
    return recipe.generation_summary(job, result)


def _check_folder(job: GenerationJob, request: GenerateRequest) -> None:
    """The folder's refusals (another generation's, a file we did not write) before any work: no
    note, no progress bar, before the one-line error."""
    from ._pipeline import check_job_folder  # here: a command's --help never loads the pipeline

    try:
        check_job_folder(job, request.overwrite)
    except (FolderTaken, ForeignFile) as exc:
        raise RequestError(str(exc)) from None


def _check(job: GenerationJob, engine: Engine | None, request: GenerateRequest) -> None:
    """The recipe's up-front check (`job.check`) in one of `engine`'s workers, else here: a local
    engine's workers have loaded the tokenizer and the writer's word pools meanwhile, which this
    process then never needs (a second or so of CPU, and their memory). Its notes are printed;
    rows that cannot be made are a RequestError."""
    if job.check is None:
        return
    try:
        notes = job.check() if engine is None else _in_worker(engine, job.check)
    except AssemblyError as exc:
        raise RequestError(str(exc)) from None
    for note in notes:
        request.messages.print(f"note: {note}", markup=False, highlight=False)


def _in_worker(engine: Engine, check: Callable[[], Sequence[str]]) -> Sequence[str]:
    outcomes = engine.map(check, [()])
    try:
        notes = next(outcomes)
    finally:
        outcomes.close()
    return check() if isinstance(notes, TaskFailed) else notes  # its worker died: here, then


def _run(job: GenerationJob, engine: Engine, advance, request: GenerateRequest) -> GenerationResult:
    """`run_job`, its refusals and failures as one-line errors."""
    from ._pipeline import FileFailed, run_job  # here: a command's --help never loads the pipeline

    try:
        return run_job(
            job, command=request.command, engine=engine, on_rows=advance, on_reused=advance, overwrite=request.overwrite
        )
    except (AssemblyError, FolderTaken, ForeignFile) as exc:
        raise RequestError(str(exc)) from None
    except FileFailed as exc:
        raise RequestError(str(exc), EXIT_FAILED) from None
    except OSError as exc:  # e.g. --out names a file, or a directory we may not write to
        raise RequestError(f"cannot write {exc.filename or job.out}: {exc.strerror or exc}") from None
