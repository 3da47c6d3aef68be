"""The dataset of the Inspect tasks: MRCR rows as Inspect samples, read lazily.

Inspect takes any `inspect_ai.dataset.Dataset` (a `Sequence[Sample]`) and, since its samples are
created inside each sample's run, holds only the samples in flight, so a dataset that builds a
sample when it is asked for one keeps memory at about one row per sample in flight. Building a
1M-token row means tokenizing it (its bin decides the filters), so the rows are read once, up
front, with the recipe's own reader (the items `mrcr-eval` sends); each selected row's messages go
to a spill file (JSON, one line per row, deleted with the dataset) and only the small fields stay
in memory. `dataset[i]` reads one line back.

A row is selected as `mrcr-eval` selects it: needle counts, then bins, then `limit` (an unreadable
row is always kept: it counts 0), then `max_context_window` (a row over it stays in the dataset,
marked `status: skipped`, so that it is never sent and counts 0 in its bin, as in `mrcr-eval`).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import tempfile
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Any, overload

from inspect_ai.dataset import Dataset, Sample
from inspect_ai.model import ChatMessage, ChatMessageAssistant, ChatMessageSystem, ChatMessageUser

from .._paths import find_parquet_files
from ..eval._failures import analyse_item
from ..eval._items import EvalItem, FileError
from ..recipes import RECIPES, found_csv, recipe_named
from ._import import inspect_task_name

STATUS_OK, STATUS_SKIPPED, STATUS_ERROR = "ok", "skipped", "error"


class DataError(ValueError):
    """Task arguments that name no usable data: one line."""


@dataclass(frozen=True)
class Row:
    """What stays in memory of a selected row: its sample's id, target and metadata, and where
    its messages are in the spill file."""

    id: str
    target: str
    metadata: dict[str, Any]
    offset: int
    length: int


class _Spill:
    """An append-then-read file of JSON lines, deleted when the last dataset using it goes."""

    def __init__(self) -> None:
        handle, self.path = tempfile.mkstemp(prefix="mrcr-inspect-", suffix=".jsonl")
        self._file: IO[bytes] = os.fdopen(handle, "w+b")
        self._finalizer = weakref.finalize(self, _remove, self._file, self.path)

    def append(self, value: Any) -> tuple[int, int]:
        data = json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")
        self._file.seek(0, os.SEEK_END)
        offset = self._file.tell()
        self._file.write(data)
        return offset, len(data)

    def read(self, offset: int, length: int) -> Any:
        self._file.seek(offset)
        return json.loads(self._file.read(length).decode("utf-8", "surrogatepass"))


def _remove(handle: IO[bytes], path: str) -> None:
    handle.close()
    with contextlib.suppress(OSError):
        os.unlink(path)


_ROLES: dict[str, type] = {"user": ChatMessageUser, "assistant": ChatMessageAssistant, "system": ChatMessageSystem}


def chat_messages(messages: list[dict], key: str = "") -> list[ChatMessage]:
    """A row's messages as Inspect's chat messages (role and text, nothing added); their ids are
    `KEY-INDEX` (`key`: the sample's id), so that a sample built twice is the same sample."""
    return [
        _ROLES[m["role"]](content=m["content"], **({"id": f"{key}-{i}"} if key else {})) for i, m in enumerate(messages)
    ]


class MrcrDataset(Dataset):
    """The selected rows, built into samples on demand (see the module docstring)."""

    def __init__(
        self, rows: list[Row], spill: _Spill, name: str | None, location: str | None, shuffled: bool = False
    ) -> None:
        self._rows = rows
        self._spill = spill
        self._name = name
        self._location = location
        self._shuffled = shuffled

    @property
    def name(self) -> str | None:
        return self._name

    @property
    def location(self) -> str | None:
        return self._location

    @property
    def shuffled(self) -> bool:
        return self._shuffled

    def _view(self, rows: list[Row], name: str | None = None) -> MrcrDataset:
        return MrcrDataset(rows, self._spill, name or self._name, self._location, self._shuffled)

    def sample(self, row: Row) -> Sample:
        messages = self._spill.read(row.offset, row.length)
        return Sample(
            input=chat_messages(messages, row.id) if messages else _not_sent(row.metadata),
            target=row.target,
            id=row.id,
            metadata=dict(row.metadata),
        )

    @overload
    def __getitem__(self, index: int) -> Sample: ...

    @overload
    def __getitem__(self, index: slice) -> Dataset: ...

    def __getitem__(self, index: int | slice) -> Sample | Dataset:
        if isinstance(index, slice):
            return self._view(self._rows[index])
        return self.sample(self._rows[index])

    def __len__(self) -> int:
        return len(self._rows)

    def __iter__(self) -> Iterator[Sample]:
        for row in self._rows:
            yield self.sample(row)

    def sort(self, reverse: bool = False, key: Callable[[Sample], Any] | None = None) -> None:
        if key is None:  # Inspect's default: by input length; the prompt's token count says it
            self._rows.sort(key=lambda r: r.metadata.get("o200k_prompt_tokens") or 0, reverse=reverse)
        else:
            keys = {id(row): key(self.sample(row)) for row in self._rows}
            self._rows.sort(key=lambda r: keys[id(r)], reverse=reverse)

    def filter(self, predicate: Callable[[Sample], bool], name: str | None = None) -> MrcrDataset:
        return self._view([row for row in self._rows if predicate(self.sample(row))], name)

    def shuffle(self, seed: int | None = None) -> None:
        random.Random(seed).shuffle(self._rows) if seed is not None else random.shuffle(self._rows)
        self._shuffled = True

    def shuffle_choices(self, seed: int | None = None) -> None:
        return None  # not a multiple-choice task


def _not_sent(metadata: dict[str, Any]) -> str:
    if metadata["status"] == STATUS_SKIPPED:
        return (
            f"(not sent: {metadata['o200k_prompt_tokens']} prompt tokens, over max_context_window "
            f"{metadata['max_context_window']})"
        )
    return f"(not sent: the row cannot be read: {metadata.get('check')}: {metadata.get('error')})"


def as_list(value: Any, convert: Callable[[Any], Any] = str) -> list[Any]:
    """A task argument given once, as a list, or as a comma-separated string (`-T needles=2,4`)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [convert(part.strip()) for part in value.split(",") if part.strip()]
    if isinstance(value, int | float):
        return [convert(value)]
    return [convert(part) for part in value]


def data_files(data: str | Sequence[str] | None) -> list[str]:
    """Files, folders, globs and hf:// paths -> data files; DataError naming what names nothing."""
    # Not split at commas: MRCR v2's file names hold them, `mrcr_v2_8needle_in_(8192,16384).csv`.
    paths = [data] if isinstance(data, str) else [str(p) for p in data or []]
    if not paths:
        raise DataError("no data: pass -T data=PATH (a file, folder, glob or hf://datasets/ORG/NAME/PATH)")
    files, problems = find_parquet_files(paths, found_csv)
    if problems:
        raise DataError("; ".join(f"{text}: {message}" for text, message in problems))
    return [str(path) for path in files]


def _row_metadata(item: EvalItem, status: str, max_context_window: int | None) -> dict[str, Any]:
    recipe = recipe_named(item.recipe)
    analysis = analyse_item(recipe, item, "") if item.error is None else None
    metadata: dict[str, Any] = {
        "file": item.source,
        "row": item.row,
        "digest": item.digest,
        "recipe": item.recipe,
        "bin": recipe.bin_label(item.bin_upper),
        "bin_upper": item.bin_upper,
        "n_needles": item.n_needles,
        "random_string": item.prefix,
        "target_depth": analysis["target_depth"] if analysis else None,
        "o200k_prompt_tokens": item.prompt_tokens,
        "o200k_tokens": item.total_tokens,
        "status": status,
    }
    if status == STATUS_SKIPPED:
        metadata["max_context_window"] = max_context_window
    if item.error is not None:
        metadata |= {"check": item.error.check, "error": item.error.message}
    return metadata


def _items(path: str, tokenizer: str) -> Iterator[EvalItem]:
    from ..eval._items import read_items

    try:
        yield from read_items(path, recipes=RECIPES, tokenizer_spec=tokenizer)
    except FileError as exc:
        raise DataError(str(exc)) from None


def mrcr_dataset(
    data: str | Sequence[str] | None,
    *,
    recipe: str,
    needles: Any = None,
    bins: Any = None,
    limit: int | None = None,
    max_context_window: int | None = None,
    tokenizer: str = "o200k_base",
) -> MrcrDataset:
    """The rows of `data` of recipe `recipe` (a registered recipe's name) that `mrcr-eval` would
    take with the same filters; DataError for bad arguments or files of another recipe."""
    own = recipe_named(recipe)
    wanted_needles = set(as_list(needles, int))
    wanted_bins = set(as_list(bins, int))
    unknown = sorted(wanted_bins - set(own.bin_uppers()))
    if unknown:
        edges = ", ".join(map(str, own.bin_uppers()))
        raise DataError(f"bins: no {own.name} bin has upper edge {unknown[0]}; choose among {edges}")
    limit = None if limit is None else int(limit)
    window = None if max_context_window is None else int(max_context_window)
    files = data_files(data)
    spill = _Spill()
    rows: list[Row] = []
    seen: dict[str, int] = {}
    for path in files:
        if limit is not None and len(rows) >= limit:
            break
        for item in _items(path, tokenizer):
            if item.recipe != own.name:
                other = inspect_task_name(recipe_named(item.recipe))
                raise DataError(f"{path} is an {item.recipe} file: run it with the task mrcr_gen/{other}")
            if limit is not None and len(rows) >= limit:
                break
            if item.error is None and (
                (wanted_needles and item.n_needles not in wanted_needles)
                or (wanted_bins and item.bin_upper not in wanted_bins)
            ):
                continue
            if item.error is not None:
                status = STATUS_ERROR
            elif window is not None and item.prompt_tokens > window:
                status = STATUS_SKIPPED
            else:
                status = STATUS_OK
            offset, length = spill.append(item.messages if status == STATUS_OK else [])
            seen[item.digest] = seen.get(item.digest, 0) + 1
            sample_id = item.digest if seen[item.digest] == 1 else f"{item.digest}-{seen[item.digest]}"
            rows.append(Row(sample_id, item.answer, _row_metadata(item, status, window), offset, length))
    if not rows:
        raise DataError(f"no row of {', '.join(files)} passes the filters")
    return MrcrDataset(rows, spill, name=own.name, location=files[0] if len(files) == 1 else os.path.commonpath(files))
