"""A recipe's chat rows for the runner: a parquet file whose rows hold a JSON list of messages
(`prompt`), the expected reply (`answer`) and the string it must start with
(`random_string_to_prepend`), read into `EvalItem`s. openai/mrcr's files are such files, and so
are those of any recipe that keeps its layout (`ChatRows` says which recipe and how it counts
needles).

Only the columns the grade needs are read (`prompt`, `answer`, `random_string_to_prepend`, and
`n_needles` when present); a file may lack the others or hold odd values in them (an ISO
`date_added`). Rows are streamed one record batch of one row at a time from a buffered column
reader, so memory stays about one row whatever the file's row-group size.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from .._counts import Counts, RowCounts, count_texts, counted_in_order
from .._errors import first_line
from .._json_text import json_string
from ._items import EvalItem, FileError, ItemError, bin_upper_of_tokens

REQUIRED_COLUMNS = ("prompt", "answer", "random_string_to_prepend")
OPTIONAL_COLUMNS = ("n_needles",)
READ_BUFFER_BYTES = 1 << 20


@dataclass(frozen=True)
class ChatRows:
    """What the reader needs of a recipe with chat rows; the functions are module-level (they pickle)."""

    recipe: str
    #: The needle count of a row whose `n_needles` column is absent or not a positive int.
    count_needles: Callable[[list[dict]], int]
    #: (check, message) of a row that cannot be sent as it is, else None; None: every row can.
    check: Callable[[list[dict]], tuple[str, str] | None] | None = None


def row_digest(prompt: Any, answer: Any, random_string: Any) -> str:
    """sha256 over what the grade depends on: the prompt sent, the answer and the random string
    (the UTF-8 of their `json.dumps([...], ensure_ascii=False)`)."""
    columns = (prompt, answer, random_string)
    if not all(type(column) is str for column in columns):
        return hashlib.sha256(json.dumps(list(columns), ensure_ascii=False).encode("utf-8")).hexdigest()
    # The same text, in half the time (a long row's: milliseconds), hashed piece by piece, never joined.
    hasher = hashlib.sha256(b"[")
    for i, column in enumerate(columns):
        hasher.update(b", " if i else b"")
        hasher.update(json_string(column).encode("utf-8"))
    hasher.update(b"]")
    return hasher.hexdigest()


def prompt_messages(prompt: str) -> list[dict]:
    """The prompt's messages exactly as the seed sends them; ValueError (the validator's
    `prompt_json` wording) unless they are a non-empty JSON list of {role, content: str}."""
    try:
        messages = json.loads(prompt)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"prompt is not valid JSON: {exc}") from None
    if not isinstance(messages, list) or not messages:
        found = "an empty list" if isinstance(messages, list) else f"a JSON {type(messages).__name__}"
        raise ValueError(f"prompt must be a non-empty JSON list of {{role, content}} objects, found {found}")
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise ValueError(f"messages[{i}] is a {type(message).__name__}, expected an object")
        if "role" not in message or not isinstance(message.get("content"), str):
            raise ValueError(f"messages[{i}] lacks a role or a string content")
    return messages


def _schema_problem(record: dict) -> str:
    """What is wrong with the first required column that does not hold a string."""
    column = next(c for c in REQUIRED_COLUMNS if not isinstance(record.get(c), str))
    value = record.get(column)
    found = "null" if value is None else type(value).__name__
    return f"column {column!r} is {found}, expected a string"


def chat_item(rows: ChatRows, source: str, index: int, record: dict, *, tokenizer_spec: str = "o200k_base") -> EvalItem:
    """The item of one raw row (a dict of its columns); a row that cannot be sent gets `error`."""
    item = _parsed(rows, source, index, record)
    texts = _texts(item)
    return item if texts is None else with_counts(item, count_texts(tokenizer_spec, texts))


def _parsed(rows: ChatRows, source: str, index: int, record: dict, digest: str | None = None) -> EvalItem:
    """The item of one raw row without its token counts (which `with_counts` adds); `digest`, the
    row's `row_digest` when the caller has it (hashing a long row again costs milliseconds)."""
    prompt, answer, prefix = (record.get(c) for c in REQUIRED_COLUMNS)
    base: dict[str, Any] = {
        "source": source,
        "row": index,
        "digest": digest or row_digest(prompt, answer, prefix),
        "recipe": rows.recipe,
    }
    if not (isinstance(prompt, str) and isinstance(answer, str) and isinstance(prefix, str)):
        return EvalItem(**base, error=ItemError(check="schema", message=_schema_problem(record)))
    try:
        messages = prompt_messages(prompt)
    except ValueError as exc:
        return EvalItem(**base, answer=answer, prefix=prefix, error=ItemError(check="prompt_json", message=str(exc)))
    if rows.check is not None and (problem := rows.check(messages)) is not None:
        return EvalItem(**base, answer=answer, prefix=prefix, error=ItemError(check=problem[0], message=problem[1]))
    n_needles = record.get("n_needles")
    if not isinstance(n_needles, int) or isinstance(n_needles, bool) or n_needles < 1:
        n_needles = rows.count_needles(messages)
    return EvalItem(**base, messages=messages, answer=answer, prefix=prefix, n_needles=n_needles)


def _texts(item: EvalItem) -> list[str] | None:
    """What a sendable item's counts are counted from: each message's content, then the answer."""
    return (
        None if item.error is not None or not item.messages else [m["content"] for m in item.messages] + [item.answer]
    )


def counted(counts: RowCounts | None, key: tuple[int, Any, Any, Any], count: Callable[[], list[int]]) -> Counts:
    """A chat row's (prompt, total) tokens: from `counts` (its sealed sidecar, the count cache) when
    they have them, else `count()` (each message's, then the answer's), then kept in `counts`.
    `key`: the row's index, then its prompt, answer and random string (what its digest covers)."""
    row, *columns = key
    digest = row_digest(*columns) if counts is not None else ""
    found = counts.get(row, digest) if counts is not None else None
    if found is None:
        numbers = count()
        found = (sum(numbers[:-1]), sum(numbers))
        if counts is not None:
            counts.put(digest, found)
    return found


def with_counts(item: EvalItem, counted: Sequence[int] | Counts) -> EvalItem:
    """`item` with its token counts: the counts of `_texts(item)`, or (prompt, total) as stored."""
    prompt, total = counted if isinstance(counted, tuple) else (sum(counted[:-1]), sum(counted))
    return item.model_copy(
        update={"bin_upper": bin_upper_of_tokens(total), "prompt_tokens": prompt, "total_tokens": total}
    )


def read_chat_items(
    rows: ChatRows,
    path: str | os.PathLike,
    *,
    tokenizer_spec: str = "o200k_base",
    skip: Callable[[int, str], bool] | None = None,
    counts: RowCounts | None = None,
) -> Iterator[EvalItem]:
    """The items of a parquet file of `rows`'s recipe in row order.

    `skip(row, digest)` true means the caller already has this row: a bare item (source, row,
    digest, n_needles) is yielded without parsing or tokenizing. `counts` gives the counts of rows
    counted before (the sidecar, the cache) and keeps those counted now; the others are counted
    on every core, a few rows ahead. A file that cannot be opened or breaks half-way raises
    FileError naming the row where it broke, after the items of the rows before it.
    """
    import pyarrow as pa

    read = _ReadState()
    stream = _pending_items(rows, path, skip, counts, read)
    try:
        for (item, _), counted in counted_in_order(stream, lambda entry: entry[1], tokenizer_spec):
            if counted is not None:
                item = with_counts(item, counted)
                if counts is not None:
                    counts.put(item.digest, (item.prompt_tokens, item.total_tokens))
            yield item
    except FileError:
        raise
    except (OSError, ValueError, pa.ArrowException) as exc:
        where = "cannot read as parquet" if read.rows == 0 else f"cannot read past row {read.rows - 1}"
        raise FileError(f"{path}: {where}: {first_line(exc)}") from None


class _ReadState:
    rows = 0  # rows read so far


def _pending_items(
    rows: ChatRows,
    path: str | os.PathLike,
    skip: Callable[[int, str], bool] | None,
    counts: RowCounts | None,
    read: _ReadState,
) -> Iterator[tuple[EvalItem, list[str] | None]]:
    """Each row's item, with the texts still to count (None: nothing to count, or counted before)."""
    import pyarrow.parquet as pq

    source = str(path)
    with pq.ParquetFile(path, buffer_size=READ_BUFFER_BYTES, pre_buffer=False) as parquet:
        names = parquet.schema_arrow.names
        missing = [c for c in REQUIRED_COLUMNS if c not in names]
        if missing:
            raise FileError(f"{path}: missing column(s) {', '.join(missing)}")
        columns = list(REQUIRED_COLUMNS) + [c for c in OPTIONAL_COLUMNS if c in names]
        for batch in parquet.iter_batches(batch_size=1, columns=columns):
            for record in batch.to_pylist():
                index = read.rows
                read.rows += 1
                digest = row_digest(*(record.get(c) for c in REQUIRED_COLUMNS))
                if skip is not None and skip(index, digest):
                    yield EvalItem(source=source, row=index, digest=digest, recipe=rows.recipe), None
                    continue
                item = _parsed(rows, source, index, record, digest)
                texts = _texts(item)
                known = counts.get(index, item.digest) if counts is not None and texts is not None else None
                yield (item, texts) if known is None else (with_counts(item, known), None)
