"""The Inspect tasks, one per registered recipe (`mrcr_gen/mrcr` for openai/mrcr, `mrcr_gen/mrcr_v2`
for MRCR v2, `mrcr_gen/<name>` for a plugin's), their solver, scorer and metrics: MRCR scored as
`mrcr-eval` scores it.

* Solver: plain generation on the row's messages (MRCR v2: its one user message), no system
  prompt, nothing added to the request: sampling parameters are the user's (`--temperature`, ...).
  A row over `max_context_window`, or one that cannot be read, is not sent.
* Scorer: the recipe's official grade of the reply (openai/mrcr: `grade`; MRCR v2: `grade_v2`),
  the lenient grade beside it (diagnostic), the per-row failure analysis and the reference floors.
* Metrics, by `mrcr-eval`'s rules (`mrcr_gen.eval._report.summarize_records`): `mean` and
  `stderr` over the rows sent or meant to be (an unreadable row counts 0; a row over the window is
  left out, as the official loop does), `lenient` over the answered rows, the mean per bin
  (`bin_<upper edge>`) and per needle count (`needles_<n>`), and `auc_128k`, `auc_1m` (the
  function `mrcr-eval` uses), whose bin means count rows over the window as 0.

A sample Inspect itself fails (an API error after its retries) has no score: Inspect's metrics
leave it out, while `mrcr-eval report LOG.eval` counts it as an error (0), as `mrcr-eval` does.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import anyio
from inspect_ai import Task, task
from inspect_ai.scorer import Metric, SampleScore, Score, Scorer, Target, metric, scorer
from inspect_ai.solver import Generate, Solver, TaskState, solver

from ..eval._auc import auc_fields
from ..eval._failures import analyse_item
from ..eval._items import EvalItem, row_extras
from ..recipes import RECIPES, recipe_named
from ._dataset import STATUS_ERROR, STATUS_OK, STATUS_SKIPPED, mrcr_dataset
from ._import import TASK_KEY, inspect_task_name


def _status(score: SampleScore) -> str:
    return str((score.score.metadata or {}).get("status", STATUS_OK))


def _value(score: SampleScore) -> float:
    return float(score.score.as_float()) if _status(score) == STATUS_OK else 0.0


def _counted(scores: list[SampleScore]) -> list[float]:
    """The official loop's rows: every row but those over the context window; errors as 0."""
    return [_value(s) for s in scores if _status(s) != STATUS_SKIPPED]


def _average(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


@metric(name="mean")
def mrcr_mean() -> Metric:
    """The headline: mean over the rows sent or meant to be (errors 0, rows over the window left out)."""

    def compute(scores: list[SampleScore]) -> float:
        found = _average(_counted(scores))
        return math.nan if found is None else found

    return compute


@metric(name="stderr")
def mrcr_stderr() -> Metric:
    """The standard error of `mean` (sample standard deviation / sqrt(n))."""

    def compute(scores: list[SampleScore]) -> float:
        values = _counted(scores)
        if len(values) < 2:
            return 0.0
        mean = sum(values) / len(values)
        variance = sum((v - mean) ** 2 for v in values) / (len(values) - 1)
        return math.sqrt(variance / len(values))

    return compute


@metric(name="lenient")
def mrcr_lenient() -> Metric:
    """The lenient grade's mean over the answered rows: a diagnostic, never the headline."""

    def compute(scores: list[SampleScore]) -> float:
        values = [
            float(lenient)
            for s in scores
            if _status(s) == STATUS_OK and (lenient := (s.score.metadata or {}).get("score_lenient")) is not None
        ]
        found = _average(values)
        return math.nan if found is None else found

    return compute


def bin_means(scores: list[SampleScore]) -> dict[int, float | None]:
    """{bin upper edge: mean over every row of the bin}, errors and rows over the window as 0."""
    by_bin: dict[int, list[float]] = defaultdict(list)
    for s in scores:
        upper = int((s.sample_metadata or {}).get("bin_upper") or 0)
        if upper > 0:
            by_bin[upper].append(_value(s))
    return {upper: _average(values) for upper, values in by_bin.items()}


@metric(name="bins")
def mrcr_bins() -> Metric:
    """The mean of each bin, as `bin_<upper edge>`."""

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        return {f"bin_{upper}": mean for upper, mean in sorted(bin_means(scores).items()) if mean is not None}

    return compute


@metric(name="needles")
def mrcr_needles() -> Metric:
    """The mean (official rule) of each needle count, as `needles_<n>`."""

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        by_needles: dict[int, list[SampleScore]] = defaultdict(list)
        for s in scores:
            by_needles[int((s.sample_metadata or {}).get("n_needles") or 0)].append(s)
        found = {f"needles_{n}": _average(_counted(members)) for n, members in sorted(by_needles.items())}
        return {name: mean for name, mean in found.items() if mean is not None}

    return compute


@metric(name="auc")
def mrcr_auc(max_context_window: int | None = None) -> Metric:
    """`auc_128k` and `auc_1m` (left out when a bin in range has no rows), as `mrcr-eval` computes them."""

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        fields = auc_fields(bin_means(scores), max_context_window)
        return {name: fields[name] for name in ("auc_128k", "auc_1m") if fields[name] is not None}  # type: ignore[misc]

    return compute


def task_metrics(max_context_window: int | None) -> list[Metric | dict[str, list[Metric]]]:
    return [mrcr_mean(), mrcr_stderr(), mrcr_lenient(), mrcr_bins(), mrcr_needles(), mrcr_auc(max_context_window)]


@solver
def mrcr_generate() -> Solver:
    """Plain generation on the row's messages; a row over the window or unreadable is not sent."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        if state.metadata.get("status", STATUS_OK) != STATUS_OK:
            state.completed = True
            return state
        return await generate(state)

    return solve


def grade_reply(metadata: dict[str, Any], target: str, reply: str, messages: list[dict], finish: str | None) -> Score:
    """The Score of one reply: the official grade, and in its metadata the lenient grade, the
    failure analysis, the floors and the status. CPU work (difflib): run it off the event loop."""
    recipe = recipe_named(metadata["recipe"])
    item = EvalItem(
        source=metadata["file"],
        row=metadata["row"],
        digest=metadata["digest"],
        messages=messages,
        answer=target,
        prefix=metadata.get("random_string") or "",
        n_needles=metadata.get("n_needles") or 0,
        bin_upper=metadata.get("bin_upper") or 0,
        recipe=recipe.name,
    )
    score = recipe.grade(reply, item)
    return Score(
        value=score,
        answer=reply,
        explanation=f"{recipe.name} official grade {score:.4f}",
        metadata={
            "status": STATUS_OK,
            "score_lenient": recipe.grade_lenient(reply, item),
            "finish_reason": finish,
            "analysis": analyse_item(recipe, item, reply, finish),
            **row_extras(recipe, item),
        },
    )


@scorer(metrics=[mrcr_mean(), mrcr_stderr()])
def mrcr_scorer() -> Scorer:
    """The recipe's official grade (see the module docstring); rows not sent score 0 with their status."""

    async def score(state: TaskState, target: Target) -> Score:
        metadata = state.metadata
        status = metadata.get("status", STATUS_OK)
        if status != STATUS_OK:
            why = metadata.get("error") if status == STATUS_ERROR else "over max_context_window"
            return Score(value=0.0, answer="", explanation=f"not sent: {why}", metadata={"status": status})
        given = state.input if isinstance(state.input, list) else []
        messages = [{"role": m.role, "content": m.text} for m in given]
        choice = state.output.choices[0] if state.output.choices else None
        stop = choice.stop_reason if choice is not None else None
        finish = {"max_tokens": "length", "model_length": "length"}.get(str(stop), stop)  # the API's words
        return await anyio.to_thread.run_sync(
            grade_reply, metadata, target.text, state.output.completion, messages, finish
        )

    return score


def _task(recipe: str, data: Any, needles: Any, bins: Any, limit: Any, max_context_window: Any, tokenizer: str) -> Task:
    window = None if max_context_window is None else int(max_context_window)
    dataset = mrcr_dataset(
        data,
        recipe=recipe,
        needles=needles,
        bins=bins,
        limit=limit,
        max_context_window=window,
        tokenizer=tokenizer,
    )
    return Task(
        dataset=dataset,
        solver=mrcr_generate(),
        scorer=mrcr_scorer(),
        metrics=task_metrics(window),
        # How `mrcr-eval report` knows a log of these tasks: Inspect names the task `mrcr` when it
        # is run from Python and `mrcr_gen/mrcr` through the registry.
        metadata={TASK_KEY: recipe},
    )


def _recipe_task(recipe: Any) -> Any:
    """The Inspect task of one registered recipe, named by `inspect_task_name`."""

    def recipe_task(
        data: str | list[str] | None = None,
        needles: int | list[int] | str | None = None,
        bins: int | list[int] | str | None = None,
        limit: int | None = None,
        max_context_window: int | None = None,
        tokenizer: str = "o200k_base",
    ) -> Task:
        return _task(recipe.name, data, needles, bins, limit, max_context_window, tokenizer)

    recipe_task.__name__ = recipe_task.__qualname__ = inspect_task_name(recipe)
    recipe_task.__doc__ = f"""{recipe.title} (files of recipe `{recipe.name}`) scored with its official grade.

    Args:
        data: data files, folders, globs or hf://datasets/ORG/NAME[@REV]/PATH-or-GLOB.
        needles: only rows with these needle counts (a list or "2,8").
        bins: only rows of the bins with these upper edges (e.g. 131072; {", ".join(map(str, recipe.bin_uppers()))}).
        limit: at most this many rows (after the filters).
        max_context_window: rows whose prompt has more tokens are not sent and count 0 in their bin.
        tokenizer: counts the prompts (o200k_base, another tiktoken encoding, hf:PATH, hf:ORG/NAME).
    """
    return task(recipe_task)


#: One task per registered recipe (built-in or a plugin's), `mrcr_gen/<name>` in Inspect's registry:
#: `mrcr_gen/mrcr` (openai/mrcr), `mrcr_gen/mrcr_v2` (MRCR v2), ...
TASKS: dict[str, Any] = {inspect_task_name(recipe): _recipe_task(recipe) for recipe in RECIPES}
globals().update(TASKS)
mrcr = TASKS["mrcr"]
mrcr_v2 = TASKS["mrcr_v2"]
