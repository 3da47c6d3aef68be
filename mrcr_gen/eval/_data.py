"""Reading MRCR rows for evaluation: token counts, bins, filters."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, ValidationError

from .._bins import bin_label
from .._models import MrcrRow
from .._parquet import iter_rows
from .._tokens import count_tokens_batch


class RowInfo(BaseModel):
    """One row of a data file, ready to be sent: messages as the seed sends them, plus counts."""

    model_config = ConfigDict(frozen=True)

    file: str
    row: int
    messages: list[dict]
    answer: str
    random_string: str
    n_needles: int
    prompt_tokens: int
    total_tokens: int
    recipe: str = "openai-mrcr"
    group: str | None = None  # MRCR v2: the transcript; its rows are sent one after another

    @property
    def bin(self) -> str:
        if self.recipe == "mrcr-v2":
            from ..v2._eval import bucket_label

            return bucket_label(self.total_tokens)
        return bin_label(self.total_tokens)


def data_key(path: str | os.PathLike) -> str:
    """How a data file is named in results: its absolute path."""
    return str(Path(path).resolve())


class DataError(ValueError):
    """A data file that cannot be read as MRCR rows; the message is one line naming file and row."""


def _first_problem(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    message = first["msg"].removeprefix("Value error, ")
    return f"{where}: {message}" if where else message


def read_rows(path: str | os.PathLike) -> Iterator[tuple[int, MrcrRow]]:
    """(index, row) for each row of an MRCR parquet file; an unreadable file or row raises DataError."""
    rows = iter_rows(path)
    index = 0
    while True:
        try:
            row = next(rows)
        except StopIteration:
            return
        except ValidationError as exc:
            raise DataError(f"{path}: row {index}: {_first_problem(exc)}") from None
        except (OSError, ValueError, pa.ArrowException) as exc:
            lines = str(exc).strip().splitlines()
            raise DataError(f"{path}: cannot read as MRCR parquet: {lines[0] if lines else type(exc).__name__}") from None
        yield index, row
        index += 1


def prompt_messages(prompt: str) -> list[dict]:
    """The prompt's messages exactly as the seed sends them; ValueError unless they are a
    non-empty JSON list of objects with a string `content` and a `role`."""
    try:
        messages = json.loads(prompt)
    except ValueError as exc:
        raise ValueError(f"prompt is not valid JSON ({exc})") from None
    if not (
        isinstance(messages, list)
        and messages
        and all(isinstance(m, dict) and "role" in m and isinstance(m.get("content"), str) for m in messages)
    ):
        raise ValueError("prompt is not a non-empty JSON list of {role, content} messages with string content")
    return messages


def row_info(file: str, index: int, row: MrcrRow) -> RowInfo:
    """The row ready to send; DataError when its prompt is not a list of messages."""
    try:
        messages = prompt_messages(row.prompt)
    except ValueError as exc:
        raise DataError(f"{file}: row {index}: {exc}") from None
    counts = count_tokens_batch([m["content"] for m in messages] + [row.answer])
    prompt_tokens = sum(counts[:-1])
    return RowInfo(
        file=file,
        row=index,
        messages=messages,
        answer=row.answer,
        random_string=row.random_string_to_prepend,
        n_needles=row.n_needles,
        prompt_tokens=prompt_tokens,
        total_tokens=prompt_tokens + counts[-1],
    )
