"""What `mrcr-eval` does with each row, decided in data order (`Planner`), and the records it writes:
the fields every row has (`base_record`) and those of a graded reply (`scored_record`)."""

from __future__ import annotations

import functools
import re
from collections.abc import Generator, Iterator, Sequence
from typing import Any

from ._config import EvalConfig
from ._failures import analyse_item
from ._items import EvalItem, EvalRecipe, FileError, read_items, recipe_named, row_extras
from ._results import STATUS_ERROR, STATUS_OK, STATUS_SKIPPED, latest_answers, latest_records, row_ranges
from ._subset import RANK_RULE, per_bin_rows

THINK_TAG = "<think>"


_THINK_BLOCK = re.compile(r"<think>.*?</think>\s*", re.DOTALL)


def graded_text(response: str, strip_think: bool) -> str:
    """The text the grader sees: the reply itself, or (--strip-think, not official) without <think> blocks."""
    return _THINK_BLOCK.sub("", response) if strip_think else response


JOB = "job"


RECORD = "record"


FILE_ERROR = "file_error"


GRADE = "grade"  # a reply of an earlier run, journaled but never graded: graded without sending


class Planner:
    """Walks the data in order and says what to do with each row: send it (a job: the items of
    one transcript group), grade a journaled reply (`_journal`), or write a record at once (skipped,
    unreadable, carried over).

    Filters apply in this order: needles, bin, limit (rows already done count toward the limit),
    then the context window. Every row gets the decision a fresh run of the same command would
    make; a stored reply is reused for a row that is to be sent. A row whose stored record was
    counted with this tokenizer is not parsed nor tokenized again unless it has to be sent.
    `selected` lists the rows this command selects, `unreadable` its files that could not be read.
    """

    def __init__(
        self,
        config: EvalConfig,
        recipes: Sequence[EvalRecipe],
        files: list[str],
        shas: dict[str, str],
        records: list[dict],
        base: dict,
        too_long: dict[tuple[str, int], int] | None = None,
        pending: dict[tuple[str, int], dict] | None = None,
    ):
        self.config = config
        self.pending = pending or {}  # (source, row) -> a journaled reply of an earlier run
        self.recipes = recipes
        self.too_long = too_long  # (source, row) -> prompt tokens, when a pre-flight counted them
        self.files = files
        self.shas = shas
        self.latest = latest_records(records)
        self.answers = latest_answers(records)
        self.base = base  # digest-independent fields of every record (settings fingerprint)
        self.taken = 0
        self.resumed = 0
        self.selected: dict[str, list[int]] = {}
        self.unreadable: list[str] = []
        self.per_bin: set[tuple[str, int]] | None = None  # the rows --per-bin keeps, once the walk begins

    def _matches(self, record: dict, digest: str) -> bool:
        """Whether a stored record is of this content of the row, under this run's settings."""
        return record.get("digest") == digest and record.get("settings") == self.base["settings"]

    def _answer(self, key: tuple[str, int], digest: str) -> dict | None:
        """The stored reply a fresh run's send would get for this row's content, if reusable."""
        answer = self.answers.get(key)
        if answer is None or not self._matches(answer, digest):
            return None
        if answer.get("status") == STATUS_OK or not self.config.retry_errors:
            return answer
        return None

    def _facts(self, key: tuple[str, int], digest: str, answer: dict | None) -> dict | None:
        """A stored record of this row's content whose counts are this run's tokenizer's."""
        for record in (self.latest.get(key), answer):
            if (
                record is not None
                and self._matches(record, digest)
                and record.get("tokenizer") == self.config.tokenizer_spec
            ):
                return record
        return None

    def _over_window(self, key: tuple[str, int], prompt_tokens: int) -> bool:
        window = self.config.max_context_window
        if window is None:
            return False
        if self.too_long is not None:
            return key in self.too_long
        return prompt_tokens > window

    def _wanted(self, n_needles: int, bin_upper: int) -> bool:
        config = self.config
        if config.needles and n_needles not in config.needles:
            return False
        return not (config.bins and bin_upper not in config.bins)

    def _skip_fields(self, key: tuple[str, int]) -> dict[str, Any]:
        return {
            "status": STATUS_SKIPPED,
            "reason": "context",
            "max_context_window": self.config.max_context_window,
            "counted_with": self.config.counting(),
        } | ({} if self.too_long is None else {"context_tokens": self.too_long[key]})

    def _record(self, key: tuple[str, int], record: dict) -> Iterator[tuple[str, Any]]:
        """Write `record` unless the row's latest stored record already says exactly that."""
        if record != self.latest.get(key):
            yield RECORD, record

    def _stored_cell(self, path: str, row: int, digest: str) -> tuple[int, int] | None:
        """The (bin upper edge, needle count) a stored record of this content counted with this tokenizer."""
        key = (path, row)
        facts = self._facts(key, digest, self._answer(key, digest))
        return None if facts is None else (int(facts.get("bin_upper") or 0), int(facts.get("n_needles") or 0))

    def _choose_per_bin(self) -> None:
        if self.config.per_bin is not None:
            self.per_bin = per_bin_rows(
                self.files,
                self.shas,
                self.config.per_bin,
                self.config.per_bin_seed,
                recipes=self.recipes,
                tokenizer_spec=self.config.tokenizer_spec,
                stored=self._stored_cell,
                cache=self.config.count_cache,
            )

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        self._choose_per_bin()  # filters in the order: needles, bin, per-bin (all by cell), limit, window
        for path in self.files:
            if self._limit_reached():
                return
            yield from self._walk_file(path)

    def _limit_reached(self) -> bool:
        return self.config.limit is not None and self.taken >= self.config.limit

    def _walk_file(self, path: str) -> Iterator[tuple[str, Any]]:
        """The steps of one file's rows, in order; the rows of one transcript group to be sent are
        one job. A file that cannot be read (or breaks) ends with its FILE_ERROR step."""
        sha = self.shas[path]
        group: list[EvalItem] = []
        known: dict[int, tuple[dict | None, dict | None]] = {}  # row -> (facts, answer)
        skip = functools.partial(self._skip, path, known)
        try:
            items = read_items(
                path,
                recipes=self.recipes,
                tokenizer_spec=self.config.tokenizer_spec,
                skip=skip,
                cache=self.config.count_cache,
                data_sha256=sha,
            )
            for item in items:
                if self._limit_reached():
                    break
                facts, answer = known.pop(item.row, (None, None))
                sends = yield from self._row(path, sha, item, facts, answer)
                if not sends:
                    continue
                if group and item.group is not None and item.group == group[-1].group:
                    group.append(item)
                else:
                    if group:
                        yield JOB, group
                    group = [item]
                if item.group is None:  # a row of its own: sent now, not once the next row is read
                    yield JOB, group
                    group = []
            if group:
                yield JOB, group
        except FileError as exc:
            if group:
                yield JOB, group
            self.unreadable.append(path)
            error = {"file": path, "row": None, "status": STATUS_ERROR, "check": "file", "error": str(exc)}
            yield FILE_ERROR, error | {"data_sha256": sha} | self.base

    def _skip(self, path: str, known: dict, row: int, digest: str) -> bool:
        """Whether the row needs no parsing: its stored counts decide it and it is not to be sent."""
        key = (path, row)
        if self.per_bin is not None and key not in self.per_bin:
            known[row] = (None, None)
            return True  # not kept: never parsed
        answer = self._answer(key, digest)
        facts = self._facts(key, digest, answer)
        if facts is not None and answer is None:
            sends = self._wanted(int(facts.get("n_needles") or 0), int(facts.get("bin_upper") or 0))
            sends = sends and not self._over_window(key, int(facts.get("o200k_prompt_tokens") or 0))
            if sends:
                facts = None  # to be sent: parse it
        known[row] = (facts, answer)
        return facts is not None

    def _row(
        self, path: str, sha: str, item: EvalItem, facts: dict | None, answer: dict | None
    ) -> Generator[tuple[str, Any], None, bool]:
        """The steps of one row (a record, a journaled reply to grade); returns whether it is to be
        sent. `facts`: a stored record that describes the bare item as a fresh parse would."""
        key = (path, item.row)
        if self.per_bin is not None and key not in self.per_bin:
            return False
        recipe = recipe_named(item.recipe, self.recipes)
        if facts is None and item.error is not None:
            self._take(key)
            error = {"status": STATUS_ERROR, "check": item.error.check, "error": item.error.message, "attempts": 0}
            yield from self._record(key, self.base | base_record(item, recipe, sha) | error)
            return False
        row_fields, n_needles, upper, prompt_tokens = self._row_facts(item, recipe, sha, facts)
        if not self._wanted(n_needles, upper):
            return False
        self._take(key)
        if self._over_window(key, prompt_tokens):
            yield from self._record(key, self.base | row_fields | self._skip_fields(key))
        elif answer is not None:  # sent before: its reply, described as this run counts the row
            self.resumed += answer.get("status") == STATUS_OK
            extras = {} if facts is not None else row_extras(recipe, item)
            yield from self._record(key, answer | self.base | row_fields | extras)
        elif key in self.pending and self._matches(self.pending[key], item.digest):
            self.resumed += 1
            yield GRADE, (item, self.pending[key])
        else:
            return True
        return False

    def _row_facts(
        self, item: EvalItem, recipe: EvalRecipe, sha: str, facts: dict | None
    ) -> tuple[dict[str, Any], int, int, int]:
        """(the row's record fields, needles, bin upper edge, prompt tokens): parsed, or for a bare
        item what a fresh parse would give, as stored."""
        if facts is None:
            fields = base_record(item, recipe, sha, tokenizer=self.config.tokenizer_spec)
            return fields, item.n_needles, item.bin_upper, item.prompt_tokens
        fields = {name: facts.get(name) for name in ROW_FIELDS} | {"data_sha256": sha}
        n_needles, upper = int(facts.get("n_needles") or 0), int(facts.get("bin_upper") or 0)
        return fields, n_needles, upper, int(facts.get("o200k_prompt_tokens") or 0)

    def _take(self, key: tuple[str, int]) -> None:
        """Count a row toward --limit and into this command's selection."""
        self.taken += 1
        self.selected.setdefault(key[0], []).append(key[1])

    def selection(self) -> dict[str, Any]:
        """What run.json records of this command's rows, for its summary (see `_report`)."""
        selection: dict[str, Any] = {
            "files": self.files,
            "rows": {path: row_ranges(rows) for path, rows in self.selected.items()},
            "unreadable": self.unreadable,
        }
        if self.config.per_bin is not None:
            selection["per_bin"] = {"k": self.config.per_bin, "seed": self.config.per_bin_seed, "rank": RANK_RULE}
        return selection


ROW_FIELDS = (
    "file",
    "row",
    "digest",
    "data_sha256",
    "recipe",
    "bin",
    "bin_upper",
    "n_needles",
    "o200k_prompt_tokens",
    "o200k_tokens",
    "tokenizer",
)


def base_record(
    item: EvalItem, recipe: EvalRecipe, data_sha256: str, *, tokenizer: str | None = None
) -> dict[str, Any]:
    """The fields of every record of a row (`ROW_FIELDS`); `tokenizer` names what counted the
    tokens and the bin (left out for a row that could not be read far enough to count them)."""
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
    } | ({} if tokenizer is None else {"tokenizer": tokenizer})


def scored_record(item: EvalItem, recipe: EvalRecipe, result: Any, strip_think: bool) -> dict[str, Any]:
    """The fields of a graded row (the reply, its scores, usage, finish_reason, the failure
    analysis of the reply as graded, extras)."""
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
        "analysis": analyse_item(recipe, item, text, result.finish_reason),
    } | row_extras(recipe, item)
