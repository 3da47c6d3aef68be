"""What `mrcr-eval` does with each row, decided in data order (`Planner`), and the records it writes:
the fields every row has (`base_record`) and those of a graded reply (`scored_record`)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

from ._config import EvalConfig
from ._items import EvalItem, EvalRecipe, FileError, read_items, recipe_named
from ._results import STATUS_ERROR, STATUS_OK, STATUS_SKIPPED

THINK_TAG = "<think>"


_THINK_BLOCK = re.compile(r"<think>.*?</think>\s*", re.DOTALL)


def graded_text(response: str, strip_think: bool) -> str:
    """The text the grader sees: the reply itself, or (--strip-think, not official) without <think> blocks."""
    return _THINK_BLOCK.sub("", response) if strip_think else response


JOB = "job"


RECORD = "record"


FILE_ERROR = "file_error"


class Planner:
    """Walks the data in order and says what to do with each row: send it (a job: the items of
    one transcript group), or write a record at once (skipped, unreadable, carried over).

    Filters apply in this order: needles, bin, limit (rows already done count toward the limit),
    then the context window. Rows already done are neither parsed nor tokenized again.
    """

    def __init__(
        self,
        config: EvalConfig,
        recipes: Sequence[EvalRecipe],
        files: list[str],
        shas: dict[str, str],
        final: dict,
        base: dict,
        too_long: dict[tuple[str, int], int] | None = None,
    ):
        self.config = config
        self.recipes = recipes
        self.too_long = too_long  # (source, row) -> prompt tokens, when a pre-flight counted them
        self.files = files
        self.shas = shas
        self.final = final
        self.base = base  # digest-independent fields of every record (settings fingerprint)
        self.taken = 0
        self.resumed = 0

    def _done(self, key: tuple[str, int], digest: str) -> dict | None:
        previous = self.final.get(key)
        if previous is None or previous.get("digest") != digest or previous.get("settings") != self.base["settings"]:
            return None
        status = previous.get("status")
        if status == STATUS_OK:
            return previous
        if status == STATUS_ERROR and not self.config.retry_errors:
            return previous
        if status == STATUS_SKIPPED and previous.get("max_context_window") == self.config.max_context_window:
            return previous
        return None

    def _over_window(self, item: EvalItem, window: int) -> bool:
        if self.too_long is not None:
            return (item.source, item.row) in self.too_long
        return item.prompt_tokens > window

    def _wanted(self, n_needles: int, bin_upper: int) -> bool:
        config = self.config
        if config.needles and n_needles not in config.needles:
            return False
        return not (config.bins and bin_upper not in config.bins)

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        config = self.config
        for path in self.files:
            if config.limit is not None and self.taken >= config.limit:
                return
            sha = self.shas[path]
            group: list[EvalItem] = []
            done_now: dict[int, dict] = {}

            def skip(row: int, digest: str, path: str = path, done_now: dict[int, dict] = done_now) -> bool:
                previous = self._done((path, row), digest)
                if previous is not None:
                    done_now[row] = previous
                return previous is not None

            try:
                for item in read_items(path, recipes=self.recipes, tokenizer_spec=config.tokenizer_spec, skip=skip):
                    if config.limit is not None and self.taken >= config.limit:
                        break
                    previous = done_now.pop(item.row, None)
                    if previous is not None:
                        if previous.get("data_sha256") != sha:  # same row in a rewritten file: still valid
                            yield RECORD, previous | {"data_sha256": sha}
                        if self._wanted(int(previous.get("n_needles") or 0), int(previous.get("bin_upper") or 0)):
                            self.taken += 1
                            self.resumed += previous.get("status") == STATUS_OK
                        continue
                    if item.error is None and not self._wanted(item.n_needles, item.bin_upper):
                        continue
                    self.taken += 1
                    record = self.base | base_record(item, recipe_named(item.recipe, self.recipes), sha)
                    if item.error is not None:
                        yield (
                            RECORD,
                            record
                            | {
                                "status": STATUS_ERROR,
                                "check": item.error.check,
                                "error": item.error.message,
                                "attempts": 0,
                            },
                        )
                    elif config.max_context_window is not None and self._over_window(item, config.max_context_window):
                        yield (
                            RECORD,
                            record
                            | {
                                "status": STATUS_SKIPPED,
                                "reason": "context",
                                "max_context_window": config.max_context_window,
                            }
                            | (
                                {}
                                if self.too_long is None
                                else {"context_tokens": self.too_long[(item.source, item.row)]}
                            ),
                        )
                    elif group and item.group is not None and item.group == group[-1].group:
                        group.append(item)
                    else:
                        if group:
                            yield JOB, group
                        group = [item]
                if group:
                    yield JOB, group
            except FileError as exc:
                if group:
                    yield JOB, group
                yield (
                    FILE_ERROR,
                    {
                        "file": path,
                        "row": None,
                        "status": STATUS_ERROR,
                        "check": "file",
                        "error": str(exc),
                        "data_sha256": sha,
                    }
                    | self.base,
                )


def base_record(item: EvalItem, recipe: EvalRecipe, data_sha256: str) -> dict[str, Any]:
    return {
        "file": item.source,
        "row": item.row,
        "digest": item.digest,
        "data_sha256": data_sha256,
        "recipe": item.recipe,
        "bin": recipe.bin_label(item.bin_upper),
        "bin_upper": item.bin_upper,
        "n_needles": item.n_needles,
        "o200k_prompt_tokens": item.prompt_tokens,
        "o200k_tokens": item.total_tokens,
    }


def scored_record(item: EvalItem, recipe: EvalRecipe, result: Any, strip_think: bool) -> dict[str, Any]:
    """The fields of a graded row (the reply, its scores, usage, finish_reason, extras)."""
    text = graded_text(result.text, strip_think)
    return {
        "status": STATUS_OK,
        "response": result.text,
        "score": recipe.grade(text, item),
        "score_lenient": recipe.grade_lenient(text, item),
        "content_null": result.content_null,
        "think": THINK_TAG in result.text,
        "reasoning_chars": result.reasoning_chars,
        "finish_reason": result.finish_reason,
        "latency_s": result.latency_s,
        "attempts": result.attempts,
        "usage": {
            "prompt_tokens": result.prompt_tokens,
            "completion_tokens": result.completion_tokens,
            "reasoning_tokens": result.reasoning_tokens,
            "cached_tokens": result.cached_tokens,
        },
    } | recipe.item_extras(item)
