"""The dataset of the Inspect tasks: MRCR rows as Inspect samples, read lazily.

Inspect takes any `inspect_ai.dataset.Dataset` (a `Sequence[Sample]`) and, since its samples are
created inside each sample's run, holds only the samples in flight, so a dataset that builds a
sample when it is asked for one keeps memory at about one row per sample in flight. Building a
1M-token row means tokenizing it (its bin decides the filters), so the rows are read once, up
front, with the recipe's own reader (the items `mrcr-eval` sends); each selected row's messages go
to a spill file (JSON, one line per row, deleted with the dataset) and only the small fields stay
in memory. `dataset[i]` reads one line back.

A row is selected as `mrcr-eval` selects it: needle counts, then bins, then `per_bin` (the same
K rows per bin and needle count as `mrcr-eval --per-bin K`), then `limit` (an unreadable row is
always kept: it counts 0), then `max_context_window` (a row over it stays in the dataset, marked
`status: skipped`, so that it is never sent and counts 0 in its bin, as in `mrcr-eval`).

A sample's id is readable: `FILE:ROW`, FILE the data file's path below the files' common folder
(a lone file: its name); the row's content digest and the file's sha256 are in its metadata.
Without `data`, a recipe that declares a default dataset (`default_data`: openai/mrcr on the Hub
at a pinned revision) reads that.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import tempfile
import weakref
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, overload

from inspect_ai._util.error import PrerequisiteError
from inspect_ai.dataset import Dataset, Sample
from inspect_ai.model import ChatMessage, ChatMessageAssistant, ChatMessageSystem, ChatMessageUser

from .._files import file_sha256
from .._paths import find_parquet_files
from .._tokens import TokenizerError, load_tokenizer
from ..eval._control import CONTROLS, sent_messages
from ..eval._failures import analyse_item
from ..eval._items import EvalItem, FileError, row_extras
from ..eval._subset import keep_lowest, subset_rank
from ..recipes import RECIPES, found_csv, recipe_named
from ._import import inspect_task_name

STATUS_OK, STATUS_SKIPPED, STATUS_ERROR = "ok", "skipped", "error"


class DataError(PrerequisiteError, ValueError):
    """Task arguments that name no usable data: one line. A PrerequisiteError, which `inspect eval`
    prints as its message alone, without a traceback."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.args = (message,)

    def __str__(self) -> str:
        return str(self.message)


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
        self,
        rows: list[Row],
        spill: _Spill,
        name: str | None,
        location: str | None,
        shuffled: bool = False,
        files: dict[str, str] | None = None,
    ) -> None:
        self._rows = rows
        self._spill = spill
        self._name = name
        self._location = location
        self._shuffled = shuffled
        #: {data file: its sha256}, as `mrcr-eval` records its data files
        self.files = dict(files or {})

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
        return MrcrDataset(rows, self._spill, name or self._name, self._location, self._shuffled, self.files)

    def sample(self, row: Row) -> Sample:
        sent = row.metadata["status"] == STATUS_OK
        return Sample(
            input=chat_messages(self._spill.read(row.offset, row.length), row.id) if sent else _not_sent(row.metadata),
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


def whole_number(name: str, value: Any, minimum: int = 0) -> int:
    """A task argument that must be a whole number (at least `minimum`); DataError naming it otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise DataError(f"{name}: expected a whole number, got {value!r}")
    try:
        number = int(value)
    except ValueError:
        raise DataError(f"{name}: expected a whole number, got {value!r}") from None
    if number < minimum:
        raise DataError(f"{name}: expected a whole number of at least {minimum}, got {value!r}")
    return number


def optional_number(name: str, value: Any, minimum: int = 0) -> int | None:
    return None if value is None else whole_number(name, value, minimum)


def as_list(value: Any, name: str = "value") -> list[int]:
    """A whole-number task argument given once, as a list, or as a comma-separated string
    (`-T needles=2,4`); DataError naming the argument for anything else."""
    if value is None:
        return []
    if isinstance(value, str):
        return [whole_number(name, part.strip()) for part in value.split(",") if part.strip()]
    if isinstance(value, list | tuple):
        return [whole_number(name, part) for part in value]
    return [whole_number(name, value)]


def data_files(data: str | Sequence[str] | None, default: str | None = None) -> list[str]:
    """Files, folders, globs and hf:// paths -> data files; DataError naming what names nothing.
    Without `data`, `default` (a recipe's default dataset), when there is one."""
    # Not split at commas: MRCR v2's file names hold them, `mrcr_v2_8needle_in_(8192,16384).csv`.
    paths = [data] if isinstance(data, str) else [str(p) for p in data or []]
    if not paths and default is None:
        raise DataError("no data: pass -T data=PATH (a file, folder, glob or hf://datasets/ORG/NAME/PATH)")
    files, problems = find_parquet_files(paths or [str(default)], found_csv)
    if problems and not paths:
        raise DataError(
            f"no -T data given, and the default dataset {default} cannot be read (offline? the Hub's cache "
            f"empty?): {problems[0][1]}; pass -T data=PATH to read local files"
        )
    if problems:
        raise DataError("; ".join(f"{text}: {message}" for text, message in problems))
    return [str(path) for path in files]


def file_labels(files: Sequence[str]) -> dict[str, str]:
    """Each data file's name in its samples' ids: its path below the files' common folder, `/`
    separated (a lone file: its name). The same files give the same names wherever they lie."""
    if len(files) == 1:
        return {files[0]: Path(files[0]).name}
    paths = {name: os.path.abspath(name) for name in files}
    root = os.path.commonpath(list(paths.values()))
    return {name: Path(os.path.relpath(path, root)).as_posix() for name, path in paths.items()}


def sample_id(label: str, row: int) -> str:
    """A sample's id: `FILE:ROW` (see `file_labels`)."""
    return f"{label}:{row}"


def _row_metadata(item: EvalItem, sha: str, control: str | None) -> dict[str, Any]:
    recipe = recipe_named(item.recipe)
    analysis = analyse_item(recipe, item, "") if item.error is None else None
    metadata: dict[str, Any] = {
        "file": item.source,
        "row": item.row,
        "digest": item.digest,
        "data_sha256": sha,
        "recipe": item.recipe,
        "bin": recipe.bin_label(item.bin_upper),
        "bin_upper": item.bin_upper,
        "n_needles": item.n_needles,
        "random_string": item.prefix,
        "target_depth": analysis["target_depth"] if analysis else None,
        "o200k_prompt_tokens": item.prompt_tokens,
        "o200k_tokens": item.total_tokens,
        "status": STATUS_ERROR if item.error is not None else STATUS_OK,
    }
    if item.error is not None:
        metadata |= {"check": item.error.check, "error": item.error.message}
    elif control is not None:  # the scorer sees only what was sent: the row's floors come from here
        metadata |= {"control": control, "row_extras": row_extras(recipe, item)}
    return metadata


def _items(path: str, tokenizer: str, sha: str, cache: bool) -> Iterator[EvalItem]:
    """The file's items; its sha256 (`sha`, hashed once) checks its sidecar's counts."""
    from ..eval._items import read_items

    try:
        yield from read_items(path, recipes=RECIPES, tokenizer_spec=tokenizer, cache=cache, data_sha256=sha)
    except FileError as exc:
        raise DataError(str(exc)) from None


@dataclass(frozen=True)
class _Candidate:
    """A row that passed the needle and bin filters, before `per_bin` and `limit`."""

    row: Row
    rank: tuple[str, str, int, str]  # `mrcr-eval --per-bin`'s order within a cell
    cell: tuple[int, int] | None  # (bin upper edge, needle count); None: unreadable, always kept


def _per_bin(candidates: list[_Candidate], k: int | None) -> list[_Candidate]:
    """The candidates `mrcr-eval --per-bin K` keeps, in their order; all of them without K."""
    if k is None:
        return candidates
    cells: dict[tuple[int, int], list[tuple[str, str, int, str]]] = defaultdict(list)
    for candidate in candidates:
        if candidate.cell is not None:
            cells[candidate.cell].append(candidate.rank)
    kept = set(keep_lowest(cells, k))
    return [c for c in candidates if c.cell is None or c.rank in kept]


@dataclass(frozen=True)
class Selection:
    """The task arguments that select rows, checked: whole numbers, known bins, a known control."""

    needles: frozenset[int]
    bins: frozenset[int]
    limit: int | None
    window: int | None
    per_bin: int | None
    per_bin_seed: int
    control: str | None


def selection(
    own: Any,
    needles: Any = None,
    bins: Any = None,
    limit: Any = None,
    max_context_window: Any = None,
    per_bin: Any = None,
    per_bin_seed: Any = 0,
    control: Any = None,
) -> Selection:
    """The checked selection of recipe `own`'s rows; DataError naming the first bad argument."""
    wanted_bins = frozenset(as_list(bins, "bins"))
    unknown = sorted(wanted_bins - set(own.bin_uppers()))
    if unknown:
        edges = ", ".join(map(str, own.bin_uppers()))
        raise DataError(f"bins: no {own.name} bin has upper edge {unknown[0]}; choose among {edges}")
    if control is not None and control not in CONTROLS:
        raise DataError(f"control: {control!r} is not a control; choose among {', '.join(CONTROLS)}")
    return Selection(
        needles=frozenset(as_list(needles, "needles")),
        bins=wanted_bins,
        limit=optional_number("limit", limit, 1),
        window=optional_number("max_context_window", max_context_window, 1),
        per_bin=optional_number("per_bin", per_bin, 1),
        per_bin_seed=whole_number("per_bin_seed", per_bin_seed),
        control=control,
    )


def _status(item: EvalItem, window: int | None) -> str:
    if item.error is not None:
        return STATUS_ERROR
    return STATUS_SKIPPED if window is not None and item.prompt_tokens > window else STATUS_OK


def mrcr_dataset(
    data: str | Sequence[str] | None,
    *,
    recipe: str,
    tokenizer: str = "o200k_base",
    cache: bool = True,
    **arguments: Any,
) -> MrcrDataset:
    """The rows of `data` of recipe `recipe` (a registered recipe's name) that `mrcr-eval` would
    take with the same filters (`arguments`: those of `selection`); DataError for bad arguments
    or files of another recipe. Token counts: a file's sealed sidecar's, else the count cache's
    (unless `cache` is False: `-T no_cache=true`), else counted on every core and cached."""
    own = recipe_named(recipe)
    chosen = selection(own, **arguments)
    try:  # before any file is read: a bad tokenizer is the argument's fault, not the first file's
        load_tokenizer(tokenizer)
    except TokenizerError as exc:
        raise DataError(f"tokenizer: {exc}") from None
    files = data_files(data, getattr(own, "default_data", None))
    shas = {path: file_sha256(path) for path in files}
    labels = file_labels(files)
    spill = _Spill()
    candidates: list[_Candidate] = []

    def enough() -> bool:  # `limit` rows taken, when no `per_bin` choice among all the rows comes first
        return chosen.per_bin is None and chosen.limit is not None and len(candidates) >= chosen.limit

    for path in files:
        if enough():
            break
        for item in _items(path, tokenizer, shas[path], cache):
            if enough():
                break
            if item.recipe != own.name:
                other = inspect_task_name(recipe_named(item.recipe))
                raise DataError(f"{path} is an {item.recipe} file: run it with the task mrcr_gen/{other}")
            if item.error is None and (
                (chosen.needles and item.n_needles not in chosen.needles)
                or (chosen.bins and item.bin_upper not in chosen.bins)
            ):
                continue
            status = _status(item, chosen.window)
            offset, length = spill.append(sent_messages(item, own, chosen.control) if status == STATUS_OK else [])
            metadata = _row_metadata(item, shas[path], chosen.control) | {"status": status}
            if status == STATUS_SKIPPED:
                metadata["max_context_window"] = chosen.window
            candidates.append(
                _Candidate(
                    Row(sample_id(labels[path], item.row), item.answer, metadata, offset, length),
                    (subset_rank(chosen.per_bin_seed, item.digest), shas[path], item.row, path),
                    None if item.error is not None else (item.bin_upper, item.n_needles),
                )
            )
    rows = [c.row for c in _per_bin(candidates, chosen.per_bin)][: chosen.limit]
    if not rows:
        raise DataError(f"no row of {', '.join(files)} passes the filters")
    location = files[0] if len(files) == 1 else os.path.commonpath(files)
    return MrcrDataset(rows, spill, name=own.name, location=location, files=shas)
