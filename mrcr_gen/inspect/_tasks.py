"""The Inspect tasks, one per registered recipe (`mrcr_gen/mrcr` for openai/mrcr, `mrcr_gen/mrcr_v2`
for MRCR v2, `mrcr_gen/<name>` for a plugin's), their solver, scorer and metrics: MRCR scored as
`mrcr-eval` scores it.

* Solver: plain generation on the row's messages (MRCR v2: its one user message), no system
  prompt, nothing added to the request: sampling parameters are the user's (`--temperature`, ...).
  A row over `max_context_window`, or one that cannot be read, is not sent.
* Scorer: a value of two keys, `score` (the recipe's official grade of the reply, openai/mrcr:
  `grade`; MRCR v2: `grade_v2`) and `lenient` (the lenient grade, a diagnostic), so that Inspect's
  epoch reducer (`--epochs N`, `--epochs-reducer`) reduces both; its metadata holds the per-row
  failure analysis and the reference floors. A row over `max_context_window` is unscored (NaN, its
  `reason` `over_context_window`); an unreadable row scores 0.
* Metrics, by `mrcr-eval`'s rules (`mrcr_gen.eval._report.summarize_records`), over the reduced
  scores (each row once, whatever the epochs): `mean` and `stderr` over the rows sent or meant to
  be (an unreadable row counts 0; a row over the window is left out, as the official loop does),
  `lenient` over the answered rows, the mean per bin (`bin_<upper edge>`) and per needle count
  (`needles_<n>`), and `auc_128k`, `auc_1m` (the function `mrcr-eval` uses), whose bin means
  count rows over the window as 0. A row's status comes from the dataset (the sample's metadata).

A sample Inspect itself fails (an API error after its retries) has no score: Inspect's metrics
leave it out, while `mrcr-eval report LOG.eval` counts it as an error (0), as `mrcr-eval` does.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from typing import Any

import anyio
from inspect_ai import Task, task
from inspect_ai.log import EvalMetric
from inspect_ai.log._log import EvalMetricDefinition  # a field of EvalScorer that inspect_ai.log does not export
from inspect_ai.model import GenerateConfig
from inspect_ai.scorer import Metric, SampleScore, Score, Scorer, Target, metric, scorer
from inspect_ai.solver import Generate, Solver, TaskState, solver

from ..eval._auc import auc_fields
from ..eval._failures import analyse_item
from ..eval._items import EvalItem, row_extras
from ..eval._planner import graded_text
from ..recipes import RECIPES, recipe_named
from ._dataset import STATUS_ERROR, STATUS_OK, STATUS_SKIPPED, DataError, mrcr_dataset
from ._import import LENIENT_KEY, OVER_WINDOW, PACKAGE, SCORE_KEY, TASK_KEY, inspect_task_name, score_value

#: The tasks' version (Inspect's `Task.version`): raised when what a task sends or how it scores changes.
TASK_VERSION = "2.0.0"


def _status(score: SampleScore) -> str:
    """The row's status, which the dataset decides (so it is the same in every epoch)."""
    return str((score.sample_metadata or {}).get("status", STATUS_OK))


def _key(score: SampleScore, key: str) -> float:
    """One key of a score's value (`score` or `lenient`, `score_value`), NaN where it has none."""
    found = score_value(score.score, key)
    return math.nan if found is None else found


def _value(score: SampleScore) -> float:
    """A row's official grade (over epochs: as Inspect's reducer reduced them); 0 for a row not
    sent or not answered."""
    found = _key(score, SCORE_KEY) if _status(score) == STATUS_OK else 0.0
    return 0.0 if math.isnan(found) else found


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
        values = [_key(s, LENIENT_KEY) for s in scores if _status(s) == STATUS_OK]
        found = _average([v for v in values if not math.isnan(v)])
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


#: The task's metrics as Inspect names them in a log of an installed mrcr-gen: (name, function, params).
_METRICS = (
    ("mean", mrcr_mean, False),
    ("stderr", mrcr_stderr, False),
    ("lenient", mrcr_lenient, False),
    ("bins", mrcr_bins, False),
    ("needles", mrcr_needles, False),
    ("auc", mrcr_auc, True),
)


def metric_definitions(max_context_window: int | None) -> list[EvalMetricDefinition]:
    """The task's metrics as a log's `eval.scorers` lists them (registry names)."""
    window = {"max_context_window": max_context_window}
    return [
        EvalMetricDefinition(name=f"{PACKAGE}/{name}", options=window if takes_window else {})
        for name, _, takes_window in _METRICS
    ]


def metric_results(scores: list[SampleScore], max_context_window: int | None) -> dict[str, EvalMetric]:
    """The task's metrics of `scores` as Inspect's results hold them: a single value under its name
    (`mean`, the metric `mrcr_gen/mean`), a dict metric's values each under its own key (`bin_4096`,
    in the group `bins`). Rows unscored at the root (NaN) are left out, as Inspect leaves them out."""
    scored = [s for s in scores if not (isinstance(s.score.value, float) and math.isnan(s.score.value))]
    found: dict[str, EvalMetric] = {}
    for name, factory, takes_window in _METRICS:
        params = {"max_context_window": max_context_window} if takes_window else {}
        maker: Any = factory
        compute = maker(max_context_window) if takes_window else maker()
        value = compute(scored)
        if isinstance(value, dict):
            found |= {
                key: EvalMetric(name=key, group=name, value=float(v), params=params)
                for key, v in value.items()
                if v is not None
            }
        else:
            found[name] = EvalMetric(name=f"{PACKAGE}/{name}", value=float(value), params=params)
    return found


@solver
def mrcr_generate() -> Solver:
    """Plain generation on the row's messages; a row over the window or unreadable is not sent."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        if state.metadata.get("status", STATUS_OK) != STATUS_OK:
            state.completed = True
            return state
        return await generate(state)

    return solve


def grade_reply(
    metadata: dict[str, Any], target: str, reply: str, messages: list[dict], finish: str | None, strip_think: bool
) -> Score:
    """The Score of one reply: its value the official grade and the lenient one (`score`,
    `lenient`: Inspect reduces each over epochs), its metadata the failure analysis, the floors and
    the status. CPU work (difflib): run it off the event loop."""
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
    graded = graded_text(reply, strip_think)
    score = recipe.grade(graded, item)
    lenient = recipe.grade_lenient(graded, item)
    control = metadata.get("control")
    return Score(
        value={SCORE_KEY: score, LENIENT_KEY: math.nan if lenient is None else lenient},
        answer=reply,
        explanation=f"{recipe.name} {'grade, NOT A SCORE (control)' if control else 'official grade'} {score:.4f}"
        + (" (<think> blocks removed: NOT OFFICIAL)" if strip_think else ""),
        metadata={
            "status": STATUS_OK,
            "score_lenient": lenient,
            "finish_reason": finish,
            # a control sent only the final query: the analysis and floors are of the whole row
            "analysis": None if control else analyse_item(recipe, item, graded, finish),
            **(metadata.get("row_extras") or {} if control else row_extras(recipe, item)),
        },
    )


def not_sent(metadata: dict[str, Any]) -> Score:
    """The Score of a row not sent: unscored (NaN, Inspect's convention) over the window, which
    the official loop leaves out; an unreadable row counts 0 (its lenient grade is unscored)."""
    if metadata.get("status") == STATUS_SKIPPED:
        return Score(
            value={SCORE_KEY: math.nan, LENIENT_KEY: math.nan},
            answer="",
            explanation=f"not sent: {metadata.get('o200k_prompt_tokens')} prompt tokens, over max_context_window",
            reason=OVER_WINDOW,
            metadata={"status": STATUS_SKIPPED},
        )
    return Score(
        value={SCORE_KEY: 0.0, LENIENT_KEY: math.nan},
        answer="",
        explanation=f"not sent: {metadata.get('error')}",
        metadata={"status": STATUS_ERROR},
    )


@scorer(metrics=[mrcr_mean(), mrcr_stderr()])
def mrcr_scorer(strip_think: bool = False) -> Scorer:
    """The recipe's official grade (see the module docstring); rows not sent: `not_sent`.
    `strip_think`: grade the reply without its <think> blocks (NOT official)."""

    async def score(state: TaskState, target: Target) -> Score:
        metadata = state.metadata
        if metadata.get("status", STATUS_OK) != STATUS_OK:
            return not_sent(metadata)
        given = state.input if isinstance(state.input, list) else []
        messages = [{"role": m.role, "content": m.text} for m in given]
        choice = state.output.choices[0] if state.output.choices else None
        stop = choice.stop_reason if choice is not None else None
        finish = {"max_tokens": "length", "model_length": "length"}.get(str(stop), stop)  # the API's words
        return await anyio.to_thread.run_sync(
            grade_reply, metadata, target.text, state.output.completion, messages, finish, bool(strip_think)
        )

    return score


def _extra_body(value: Any) -> dict[str, Any] | None:
    """`-T extra_body=...`: a mapping (Inspect reads `-T` values as YAML), or JSON text of one."""
    if value is None or isinstance(value, dict):
        return value
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            return parsed
    raise DataError(f'extra_body: expected a mapping such as {{"top_k": 20}}, got {value!r}')


def _flag(name: str, value: Any) -> bool:
    """A true/false task argument (`-T NAME=true`: Inspect reads `-T` values as YAML)."""
    if not isinstance(value, bool):
        raise DataError(f"{name}: expected true or false, got {value!r}")
    return value


def _task(
    recipe: Any, data: Any, tokenizer: str, strip_think: Any, extra_body: Any, no_cache: Any, **selection: Any
) -> Task:
    _flag("strip_think", strip_think)
    cache = not _flag("no_cache", no_cache)
    body = _extra_body(extra_body)
    dataset = mrcr_dataset(data, recipe=recipe.name, tokenizer=tokenizer, cache=cache, **selection)
    window = None if selection.get("max_context_window") is None else int(selection["max_context_window"])
    return Task(
        dataset=dataset,
        solver=mrcr_generate(),
        scorer=mrcr_scorer(strip_think=strip_think),
        metrics=task_metrics(window),
        config=GenerateConfig(extra_body=body) if body else GenerateConfig(),
        version=TASK_VERSION,
        description=f"{recipe.title}: multi-round coreference resolution in long chats, scored with its official grade",
        # How `mrcr-eval report` knows a log of these tasks: Inspect names the task `mrcr` when it
        # is run from Python and `mrcr_gen/mrcr` through the registry. The data files' sha256
        # (`data`, as run.json records them) say exactly what was read.
        metadata={
            TASK_KEY: recipe.name,
            "recipe_version": recipe.version,
            "data": [{"path": path, "sha256": sha} for path, sha in dataset.files.items()],
            "control": selection.get("control"),
            "strip_think": strip_think,
        },
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
        per_bin: int | None = None,
        per_bin_seed: int = 0,
        control: str | None = None,
        strip_think: bool = False,
        extra_body: dict[str, Any] | None = None,
        no_cache: bool = False,
    ) -> Task:
        return _task(
            recipe,
            data,
            tokenizer,
            strip_think,
            extra_body,
            no_cache,
            needles=needles,
            bins=bins,
            limit=limit,
            max_context_window=max_context_window,
            per_bin=per_bin,
            per_bin_seed=per_bin_seed,
            control=control,
        )

    default = getattr(recipe, "default_data", None)
    default_text = f"; default {default}" if default else ""
    recipe_task.__name__ = recipe_task.__qualname__ = inspect_task_name(recipe)
    recipe_task.__doc__ = f"""{recipe.title} (files of recipe `{recipe.name}`) scored with its official grade.

    Args:
        data: data files, folders, globs or hf://datasets/ORG/NAME[@REV]/PATH-or-GLOB{default_text}.
        needles: only rows with these needle counts (a list or "2,8").
        bins: only rows of the bins with these upper edges (e.g. 131072; {", ".join(map(str, recipe.bin_uppers()))}).
        limit: at most this many rows (after the filters).
        max_context_window: rows whose prompt has more tokens are not sent: unscored, and 0 in their bin.
        tokenizer: counts the prompts (o200k_base, another tiktoken encoding, hf:PATH, hf:ORG/NAME).
        per_bin: the same K rows per bin and needle count as `mrcr-eval --per-bin K`.
        per_bin_seed: the seed of that choice (`mrcr-eval --per-bin-seed`).
        control: "query-only": send each row's final query alone (a memorization control, not a score).
        strip_think: grade replies without their <think> blocks (NOT official).
        extra_body: merged into every request body (e.g. {{"chat_template_kwargs": {{"enable_thinking": false}}}}).
        no_cache: count the rows a sidecar does not vouch for anew, neither reading nor adding to the count cache.
    """
    return task(recipe_task)


#: One task per registered recipe (built-in or a plugin's), `mrcr_gen/<name>` in Inspect's registry:
#: `mrcr_gen/mrcr` (openai/mrcr), `mrcr_gen/mrcr_v2` (MRCR v2), ...
TASKS: dict[str, Any] = {inspect_task_name(recipe): _recipe_task(recipe) for recipe in RECIPES}
globals().update(TASKS)
mrcr = TASKS["mrcr"]
mrcr_v2 = TASKS["mrcr_v2"]
