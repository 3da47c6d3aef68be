"""MRCR v2 for the eval runner: a reader (file -> recipe-neutral EvalItems), the graders on
items, reference floors, and the numbers Google reports.

Each row is sent as ONE user message holding the whole `queries` string, as upstream does.
`group` is the transcript id, so the runner sends the rows of a transcript one after another
and a provider's prefix cache holds the shared transcript.
"""

from __future__ import annotations

import csv
import hashlib
import os
import random
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa

from ..._counts import RowCounts, counted_in_order
from ..._errors import first_line
from ..._tokens import count_tokens
from ...eval._auc import auc_fields
from ...eval._items import EvalItem, FileError, ItemError
from ...eval._report import _mean, mean_of
from ...eval._results import STATUS_SKIPPED
from ._checks import transcript_id
from ._generate import V2_BUCKETS, v2_bucket_for
from ._grade import grade_v2, grade_v2_fast, grade_v2_lenient
from ._rows import coerce_record, iter_records
from ._text import HASH_PATTERN, parse_query, split_transcript

RECIPE = "mrcr-v2"
UP_TO_128K = 131072
AT_1M = (524288, 1048576)
DEFAULT_WRITING_SAMPLES = 16


def row_digest(queries: Any, answer: Any) -> str:
    """sha256 over what the grade depends on: the text sent and the answer."""
    digest = hashlib.sha256()
    for part in (queries, answer):
        data = str(part).encode("utf-8", "surrogatepass")
        digest.update(len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()


def bucket_upper(n_tokens: int) -> int:
    """Upper edge of the v2 bucket holding `n_tokens` (4096 below the buckets, 2x the last above)."""
    found = v2_bucket_for(n_tokens)
    if found is not None:
        return found.upper
    return V2_BUCKETS[0].lower if n_tokens <= V2_BUCKETS[0].lower else 2 * V2_BUCKETS[-1].upper


def read_v2_items(
    path: str | os.PathLike,
    *,
    tokenizer_spec: str = "o200k_base",
    skip: Callable[[int, str], bool] | None = None,
    counts: RowCounts | None = None,
) -> Iterator[EvalItem]:
    """One item per row, in row order; FileError when the file cannot be read. The prompt is
    counted exactly: each transcript once, plus each row's final query (a split the tokenizer
    always makes, see `_checks`), unless `counts` has the row's counts (its sidecar, the cache),
    where those counted now are kept. The counting runs on every core, a few rows ahead
    (`counted_in_order`). `skip(row, digest)` true yields a bare item without parsing."""
    read = _Read()
    transcript_tokens = 0  # the count of the transcript a row's NEW_TRANSCRIPT counted last
    try:
        pending = _pending_v2_items(str(os.path.realpath(path)), path, skip, counts, tokenizer_spec, read)
        for (item, kind, _), counted in counted_in_order(pending, lambda entry: entry[2], tokenizer_spec):
            if counted is not None:
                if kind == NEW_TRANSCRIPT:
                    transcript_tokens = counted[0]
                item = _with_prompt(item, counted[0] if kind == WHOLE else transcript_tokens + counted[-1])
                if counts is not None:
                    counts.put(item.digest, (item.prompt_tokens, item.total_tokens))
            yield item
    except (OSError, ValueError, csv.Error, pa.ArrowException) as exc:
        where = "cannot read" if read.index < 0 else f"cannot read past row {read.index}"
        raise FileError(f"{path}: {where}: {first_line(exc)}") from None


#: What a row's texts to count are: its transcript and final query (the first row of a
#: transcript), its final query (the transcript counted for an earlier row), its whole prompt.
NEW_TRANSCRIPT, SAME_TRANSCRIPT, WHOLE = "new transcript", "same transcript", "whole"


class _Read:
    index = -1  # the last row read


def _pending_v2_items(
    source: str,
    path: str | os.PathLike,
    skip: Callable[[int, str], bool] | None,
    counts: RowCounts | None,
    tokenizer_spec: str,
    read: _Read,
) -> Iterator[tuple[EvalItem, str | None, list[str] | None]]:
    """Each row's item, with its counts where they are known already (else the kind and the texts
    that `read_v2_items` counts for it)."""
    counted_transcript = None  # the transcript an earlier row's texts count
    for index, record in enumerate(iter_records(path)):
        read.index = index
        queries, answer = record.get("queries"), record.get("answer")
        digest = row_digest(queries, answer)
        if skip is not None and skip(index, digest):
            yield EvalItem(source=source, row=index, digest=digest, recipe=RECIPE), None, None
            continue
        item, transcript = make_v2_item(source, index, record, digest, tokenizer_spec)
        known = counts.get(index, digest) if counts is not None and transcript is not None else None
        if transcript is None:
            yield item, None, None
        elif known is not None:
            yield _with_prompt(item, known[0]), None, None
        elif tokenizer_spec != "o200k_base":
            yield item, WHOLE, [item.messages[0]["content"]]
        else:
            view_ops = item.messages[0]["content"][len(transcript) :]
            if item.group == counted_transcript:
                yield item, SAME_TRANSCRIPT, [view_ops]
            else:
                counted_transcript = item.group
                yield item, NEW_TRANSCRIPT, [transcript, view_ops]


def _with_prompt(item: EvalItem, prompt_tokens: int) -> EvalItem:
    return item.model_copy(
        update={
            "bin_upper": bucket_upper(prompt_tokens),
            "prompt_tokens": prompt_tokens,
            "total_tokens": prompt_tokens,  # v2 lengths count the text sent, not the answer
        }
    )


def make_v2_item(
    source: str, index: int, record: dict, digest: str, tokenizer_spec: str = "o200k_base"
) -> tuple[EvalItem, str | None]:
    """The item of one raw v2 record, with its transcript, its prompt not counted yet (see
    `_with_prompt`); a row that cannot be sent gets `error` (the validator's check) and, where they
    can be told, its needle count and length, so it counts 0 in its bucket (and no transcript).
    With another tokenizer than o200k, whose splits at turn seams are not known, each row is
    counted whole."""
    base: dict[str, Any] = {"source": source, "row": index, "digest": digest, "recipe": RECIPE}
    try:
        rec = coerce_record(record)
    except ValueError as exc:
        item = EvalItem(**base, **_measured(record, tokenizer_spec), error=ItemError(check="v2_row", message=str(exc)))
        return item, None
    queries, answer, view_ops = rec.get("queries"), rec.get("answer"), rec.get("view_ops")
    if not (isinstance(queries, str) and isinstance(answer, str) and isinstance(view_ops, str)) or not queries.endswith(
        view_ops
    ):
        error = ItemError(check="view_ops", message="view_ops is not the tail of queries")
        return EvalItem(**base, **_measured(rec, tokenizer_spec), error=error), None
    query = parse_query(view_ops)
    if query is None or not HASH_PATTERN.fullmatch(query.hash):
        error = ItemError(check="final_query", message="view_ops is not an MRCR v2 query")
        return EvalItem(**base, **_measured(rec, tokenizer_spec), error=error), None
    transcript = queries[: len(queries) - len(view_ops)]
    item = EvalItem(
        **base,
        messages=[{"role": "user", "content": queries}],
        answer=answer,
        prefix=query.hash,
        n_needles=int(rec.get("num_relevant") or 0),
        group=transcript_id(transcript),
    )
    return item, transcript


def _measured(record: dict, tokenizer_spec: str) -> dict[str, Any]:
    """The needle count and length of a row that cannot be sent, where they can be told (the
    whole `queries` counted): without them its error would drop out of every bucket."""
    found: dict[str, Any] = {}
    try:
        n_needles = int(record.get("num_relevant"))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        n_needles = 0
    if n_needles > 0:
        found["n_needles"] = n_needles
    queries = record.get("queries")
    if isinstance(queries, str) and queries:
        tokens = count_tokens(queries, tokenizer_spec)
        found |= {"bin_upper": bucket_upper(tokens), "prompt_tokens": tokens, "total_tokens": tokens}
    return found


def row_floors(queries: str, answer: str, *, writing_samples: int = DEFAULT_WRITING_SAMPLES) -> dict[str, float | None]:
    """Upstream's two noise models for one row: a reply of the hash + a writing of the queried
    key drawn uniformly (about 1/n), or + any writing of the transcript (about 1%; a fixed-seed
    sample of `writing_samples` writings)."""
    split_at = queries.rfind("User: Prepend ")
    query = parse_query(queries[split_at:]) if split_at >= 0 else None
    parsed = split_transcript(queries[:split_at]) if query is not None else None
    if query is None or parsed is None:
        return {"floor_random_needle": None, "floor_random_writing": None}
    turns = parsed[1]
    needles = [t.text for t in turns if t.ask == query.ask]
    writings = [t.text for t in turns]
    if len(writings) > writing_samples:
        writings = random.Random(answer[:12]).sample(writings, writing_samples)

    def mean(texts: list[str]) -> float | None:
        return sum(grade_v2_fast(query.hash + t, answer) for t in texts) / len(texts) if texts else None

    return {"floor_random_needle": mean(needles), "floor_random_writing": mean(writings)}


def item_floors(item: EvalItem) -> dict[str, float | None]:
    """The reference floors of a row that can be sent; {} for one that cannot."""
    if item.error is not None or not item.messages:
        return {}
    return row_floors(item.messages[0]["content"], item.answer)


def query_only_messages(item: EvalItem) -> list[dict]:
    """`--control query-only` for a v2 row: the few-shot block (examples 1 and 2, and the opening of
    example 3, the transcript) followed at once by the final query, as one user message: the turns
    of the transcript are what is left out. The few-shot block stays for the reason openai/mrcr's
    preamble does: it holds none of the transcript's writings and shows the answer's form."""
    queries = item.messages[0]["content"]
    split_at = queries.rfind("User: Prepend ")
    parsed = split_transcript(queries[:split_at]) if split_at >= 0 else None
    if parsed is None:
        return [{"role": "user", "content": queries[split_at:] if split_at >= 0 else queries}]
    return [{"role": "user", "content": queries[: parsed[0]] + queries[split_at:]}]


# --- report ----------------------------------------------------------------------------------


def v2_report(records: list[dict[str, Any]], max_context_window: int | None = None) -> dict[str, Any]:
    """The numbers to compare with Google's: per needle count, the mean per bucket, "up to 128K"
    (the mean over every row of at most 131072 tokens), "at 1M" (the (524288, 1048576] bucket),
    Context Arena's `auc_128k` / `auc_1m` over the bucket means (as for openai/mrcr), and the mean
    noise floors. Records need `score`, `n_needles` and a token count (`context_len`,
    `prompt_tokens` or `o200k_prompt_tokens`); records without one are left out.

    Two rules, as in the common summary: `mean_score` (and `count`) is the official loop's, so a
    record with status "skipped" (it did not fit the context window) is not scored there; the
    bucket means, "up to 128K", "at 1M" and the AUCs are over every row, skipped ones counting 0."""
    by_needles: dict[int, list[tuple[int, dict]]] = defaultdict(list)
    for record in records:
        if record.get("status") == STATUS_SKIPPED:
            record = record | {"score": 0.0}
        if record.get("score") is None:
            continue
        tokens = record.get("context_len", record.get("prompt_tokens", record.get("o200k_prompt_tokens")))
        if isinstance(tokens, int) and tokens > 0:
            by_needles[int(record["n_needles"])].append((tokens, record))
    out = []
    for n, rows in sorted(by_needles.items()):
        buckets: dict[int, list[dict]] = defaultdict(list)
        for tokens, record in rows:
            buckets[bucket_upper(tokens)].append(record)
        scored = [r for _, r in rows if r.get("status") != STATUS_SKIPPED]
        cells: list[dict[str, Any]] = [
            {
                "bucket": f"({upper // 2}, {upper}]",
                "bucket_upper": upper,
                "count": len(members),
                "skipped": sum(1 for m in members if m.get("status") == STATUS_SKIPPED),
                "mean_score": _mean([m["score"] for m in members]),
                "mean_score_lenient": mean_of(members, "score_lenient"),
                "floor_random_needle": mean_of(members, "floor_random_needle"),
                "floor_random_writing": mean_of(members, "floor_random_writing"),
            }
            for upper, members in sorted(buckets.items())
        ]
        up_to = [r["score"] for tokens, r in rows if tokens <= UP_TO_128K]
        at_1m = [r["score"] for tokens, r in rows if AT_1M[0] < tokens <= AT_1M[1]]
        out.append(
            {
                "n_needles": n,
                "count": len(scored),
                "skipped": len(rows) - len(scored),
                "mean_score": _mean([r["score"] for r in scored]),
                "up_to_128k": _mean(up_to),
                "up_to_128k_count": len(up_to),
                "at_1m": _mean(at_1m),
                "at_1m_count": len(at_1m),
                **{
                    k: v
                    for k, v in auc_fields(
                        {c["bucket_upper"]: c["mean_score"] for c in cells}, max_context_window
                    ).items()
                    if k.startswith("auc")
                },
                "floor_random_needle": _mean(
                    [r["floor_random_needle"] for _, r in rows if r.get("floor_random_needle") is not None]
                ),
                "floor_random_writing": _mean(
                    [r["floor_random_writing"] for _, r in rows if r.get("floor_random_writing") is not None]
                ),
                "buckets": cells,
            }
        )
    usage = [r.get("usage") or {} for r in records]
    cached = [u["cached_tokens"] for u in usage if isinstance(u.get("cached_tokens"), int)]
    return {
        "recipe": RECIPE,
        "by_needles": out,
        # How much of the prompts the provider served from its prefix cache (None: not reported).
        "prompt_tokens": sum(u["prompt_tokens"] for u in usage if isinstance(u.get("prompt_tokens"), int)),
        "cached_tokens": sum(cached) if cached else None,
    }


def grade_v2_responses(
    data: str | os.PathLike,
    responses: dict[int, str],
    *,
    allow_missing: bool = False,
    cache: bool = True,
    items: dict[int, EvalItem] | None = None,
) -> dict[str, Any]:
    """`mrcr-grade` for a v2 file: every row needs one response unless `allow_missing`;
    ValueError naming the rows otherwise. Token counts: the sealed sidecar's, else the count
    cache's (unless `cache` is False), else counted and cached. `items`, when given, receives
    each graded row's item (for the HTML page)."""
    counts = RowCounts(data, "o200k_base", cache=cache)
    read = list(read_v2_items(data, skip=lambda row, digest: row not in responses, counts=counts))
    extra = sorted(set(responses) - set(range(len(read))))
    if extra:
        raise ValueError(f"responses name rows the data file lacks: {extra[:5]}")
    missing = [item.row for item in read if item.row not in responses]
    if missing and not allow_missing:
        raise ValueError(
            f"{len(missing)} rows have no response (first: {missing[:5]}); use --allow-missing to grade a subset"
        )
    rows: list[dict[str, Any]] = []
    for item in read:
        if item.row not in responses:
            continue
        if item.error is not None:
            raise ValueError(f"{data}: row {item.row}: {item.error.message}")
        if items is not None:
            items[item.row] = item
        response = responses[item.row]
        rows.append(
            {
                "row": item.row,
                "score": grade_v2(response, item.answer),
                "score_lenient": grade_v2_lenient(response, item.answer),
                "bin": f"({item.bin_upper // 2}, {item.bin_upper}]",
                "n_needles": item.n_needles,
                "context_len": item.prompt_tokens,
                **row_floors(item.messages[0]["content"], item.answer),
            }
        )
    cells: dict[tuple[str, int], list[float]] = defaultdict(list)
    for r in rows:
        cells[(r["bin"], r["n_needles"])].append(r["score"])
    return {
        "recipe": RECIPE,
        "mean": _mean([r["score"] for r in rows]),
        "n_rows": len(rows),
        "missing": missing,
        "rows": rows,
        "cells": [
            {"bin": b, "n_needles": n, "count": len(v), "mean": _mean(v)}
            for (b, n), v in sorted(cells.items(), key=lambda kv: (int(kv[0][0].split(", ")[1][:-1]), kv[0][1]))
        ],
        "report": v2_report(rows),
    }


def render_v2_table(report: dict[str, Any]):
    """A rich table of `v2_report`: Google's summary numbers per needle count, with the floors."""
    from rich.table import Table

    def fmt(value: float | None) -> str:
        return "-" if value is None else f"{value:.3f}"

    table = Table(title="MRCR v2 summary (compare with Google's reports)")
    table.caption = "rows: scored or failed; up to 128K, at 1M and AUC count errors and skipped rows 0"
    for column in (
        "needles",
        "rows",
        "skipped",
        "up to 128K",
        "at 1M",
        "AUC@128k",
        "AUC@1M",
        "random needle floor",
        "random writing floor",
    ):
        table.add_column(column, justify="right")
    for entry in report["by_needles"]:
        table.add_row(
            str(entry["n_needles"]),
            str(entry["count"]),
            str(entry.get("skipped", 0)),
            f"{fmt(entry['up_to_128k'])} ({entry['up_to_128k_count']})",
            f"{fmt(entry['at_1m'])} ({entry['at_1m_count']})",
            fmt(entry["auc_128k"]),
            fmt(entry["auc_1m"]),
            fmt(entry["floor_random_needle"]),
            fmt(entry["floor_random_writing"]),
        )
    return table
