"""Harvest: the (ask, writing) pairs of benchmark files into a pool, with the catalog found.

Which pairs a file holds is its recipe's business (`Recipe.harvest_rows`: per row, the pairs as
pool asks `write a {format} about {entity}`, None for one that is not); this module counts them,
drops duplicates, counts every writing's tokens and writes the pool and its catalog atomically.

Empty inputs: a file with no rows adds nothing to a pool, and is no reason to refuse the others
(a folder may hold an empty shard); it is listed in the report and the catalog (`empty_files`).
A pool with no writing is never useful (generation from it can only fail), so it is refused with
a `PoolError` saying why (no rows, or no pair of the pool's form), and nothing is written.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

from .._errors import first_line
from .._files import write_text_atomic
from .._models import Ask, _Frozen
from .._paths import hub_source
from .._tokens import DEFAULT_TOKENIZER, count_tokens_batch, load_tokenizer
from ._pool import PoolError, PoolWriting, catalog_summary, check_pool_out, dedupe, dumps_json, write_pool


class HarvestedPair(NamedTuple):
    """One (ask, writing) pair of a file, the ask as a pool holds it."""

    ask: Ask
    text: str


#: What a recipe reads from one of its files: per row, its pairs (None for one that is not an ask
#: of the pool's form followed by a writing); a `PoolError` naming the file if it is not one of its.
RowReader = Callable[[Path], Iterable[Sequence[HarvestedPair | None]]]


class HarvestReport(_Frozen):
    files: tuple[str, ...]
    rows: int
    pairs: int  # (ask, writing) pairs seen, preamble and final query excluded
    duplicates: int  # identical (ask, writing) pairs dropped
    unparsed: int  # pairs whose user message is not an ask of the pool's form, or without a writing (skipped)
    writings: int  # distinct writings in the pool
    asks: int
    formats: int
    entities: int
    tokens: int  # tokens of the pool's writings, by `tokenizer`
    tokenizer: str = DEFAULT_TOKENIZER
    out: str
    catalog: str
    empty_files: tuple[str, ...] = ()  # inputs with no rows (nothing harvested from them)


def catalog_path(out: str | os.PathLike) -> Path:
    """`pool.parquet` -> `pool.catalog.json`, beside the pool."""
    out = Path(out)
    return out.with_name(out.name.removesuffix(".parquet") + ".catalog.json")


def source_label(path: Path) -> str:
    """What a harvested writing records as its source: the file, with its parent folder."""
    return f"{path.parent.name}/{path.name}" if path.parent.name else path.name


def named(paths: Sequence[str | os.PathLike], limit: int = 3) -> str:
    """`a, b and c`, or `a, b, c and 4 more` past `limit` names."""
    names = [str(p) for p in paths]
    if len(names) > limit:
        return f"{', '.join(names[:limit])} and {len(names) - limit} more"
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _empty_pool(files: Sequence[Path], rows: int, pairs: int) -> PoolError:
    """Why no writing was harvested, in one line."""
    if rows == 0:
        if len(files) == 1:
            return PoolError(f"{files[0]} has no rows: the pool would be empty")
        return PoolError(f"none of the {len(files)} inputs has rows ({named(files)}): the pool would be empty")
    where = f"{rows:,} row(s) of {files[0] if len(files) == 1 else named(files)}"
    if pairs == 0:
        return PoolError(f"no (ask, writing) pair in {where}: the pool would be empty")
    return PoolError(
        f"none of the {pairs:,} pairs in {where} has a parsable ask and a writing: the pool would be empty"
    )


def _checked_inputs(paths: Sequence[str | os.PathLike], out: str | os.PathLike) -> list[Path]:
    """The input files, each one there, and `out` a pool we may write (PoolError: nothing written)."""
    files = [Path(p) for p in paths]
    if not files:
        raise PoolError("no input files: the pool would be empty")
    for path in files:
        if not path.is_file():
            raise PoolError(f"{path} does not exist")
    check_pool_out(out, [catalog_path(out)])
    return files


def harvest_files(
    paths: Sequence[str | os.PathLike],
    out: str | os.PathLike,
    read_rows: RowReader,
    *,
    on_row: Callable[[], None] | None = None,
    tokenizer: str = DEFAULT_TOKENIZER,
) -> HarvestReport:
    """Write every distinct (ask, writing) pair that `read_rows` finds in the files to a pool, and
    the catalog found beside it; each writing counted with `tokenizer`. PoolError (nothing
    written) for a missing or unreadable input, or when the pool would be empty."""
    load_tokenizer(tokenizer)
    files = _checked_inputs(paths, out)
    writings: list[PoolWriting] = []
    seen: set[tuple[str, str]] = set()
    pair_formats: Counter[str] = Counter()
    pair_entities: Counter[str] = Counter()
    empty: list[Path] = []
    rows = pairs = duplicates = unparsed = 0
    for path in files:
        source = source_label(path)
        rows_before = rows
        try:
            for row_pairs in read_rows(path):
                rows += 1
                fresh: list[HarvestedPair] = []
                for pair in row_pairs:
                    pairs += 1
                    if pair is None or not pair.text:
                        unparsed += 1
                        continue
                    pair_formats[pair.ask.format] += 1
                    pair_entities[pair.ask.entity] += 1
                    key = (pair.ask.text, pair.text)
                    if key in seen:
                        duplicates += 1
                        continue
                    seen.add(key)
                    fresh.append(pair)
                counts = count_tokens_batch([pair.text for pair in fresh], tokenizer=tokenizer)
                writings += [
                    PoolWriting.make(pair.ask, pair.text, n, source) for pair, n in zip(fresh, counts, strict=True)
                ]
                if on_row is not None:
                    on_row()
        except PoolError:
            raise
        except (OSError, ValueError, KeyError) as exc:  # a recipe's reader says what it knows; this is the rest
            raise PoolError(f"{path} cannot be harvested: {first_line(exc)}") from None
        if rows == rows_before:
            empty.append(path)
    writings, dropped = dedupe(writings)
    duplicates += dropped
    if not writings:
        raise _empty_pool(files, rows, pairs)
    write_pool(writings, out, tokenizer)
    catalog = catalog_summary(writings, (pair_formats, pair_entities))
    catalog = {"files": [str(p) for p in files], "rows": rows, "pairs": pairs, "duplicates": duplicates, **catalog}
    if empty:
        catalog["empty_files"] = [str(p) for p in empty]
    if tokenizer != DEFAULT_TOKENIZER:
        catalog["tokenizer"] = load_tokenizer(tokenizer).describe()
    hub = {str(p): url for p in files if (url := hub_source(p)) is not None}
    if hub:
        catalog["hub_sources"] = hub
    write_text_atomic(catalog_path(out), dumps_json(catalog))
    return HarvestReport(
        files=tuple(str(p) for p in files),
        rows=rows,
        pairs=pairs,
        duplicates=duplicates,
        unparsed=unparsed,
        writings=len(writings),
        asks=catalog["asks"],
        formats=len(catalog["formats"]),
        entities=len(catalog["entities"]),
        tokens=sum(w.n_tokens for w in writings),
        tokenizer=tokenizer,
        out=str(out),
        catalog=str(catalog_path(out)),
        empty_files=tuple(str(p) for p in empty),
    )
