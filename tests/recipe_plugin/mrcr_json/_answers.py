"""mrcr-json rows read back: a row's conversation (`parse`), the grade, the answer form, the eval reader."""

from __future__ import annotations

import hashlib
import json
import re
from collections import namedtuple
from collections.abc import Callable, Iterator
from difflib import SequenceMatcher
from typing import Any

import pyarrow.parquet as pq

from mrcr_gen._tokens import count_tokens_batch
from mrcr_gen.eval._items import EvalItem, ItemError, bin_upper_of_tokens

NAME = "mrcr-json"
QUERY = re.compile(
    r'Return the (?P<k>\d+)\w\w \(1 indexed\) (?P<what>.+?) as a JSON object \{"prefix": "(?P<rs>[^"]*)"'
)
#: messages, the needles' ask, the 1-based ordinal asked for, the query's prefix, the needles' message indices
Row = namedtuple("Row", "messages ask k prefix needles")


def parse(messages: Any) -> Row:
    """The row of a prompt's messages; ValueError (one line) unless they are messages ending in the query."""
    if not isinstance(messages, list) or not all(
        isinstance(m, dict) and isinstance(m.get("content"), str) for m in messages
    ):
        raise ValueError("prompt is not a JSON list of {role, content} messages")
    query = QUERY.match(messages[-1]["content"]) if messages else None
    if query is None:
        raise ValueError("the last message is not the query for a JSON object")
    ask = "write a " + query["what"]
    needles = [i + 1 for i, m in enumerate(messages[:-2]) if m["content"] == ask and m.get("role") == "user"]
    return Row(messages, ask, int(query["k"]), query["rs"], needles)


def reply_object(reply: str) -> dict:
    try:
        found = json.loads(reply)
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def grade(reply: str, answer: str, prefix: str) -> float:
    """0 unless the reply is a JSON object whose `prefix` is the random string; else the MRCR
    ratio `SequenceMatcher(None, text, answer).ratio()` of its `text` against the writing asked for."""
    found = reply_object(reply)
    if found.get("prefix") != prefix or not isinstance(found.get("text"), str):
        return 0.0
    return SequenceMatcher(None, found["text"], answer).ratio()


class JsonAnswer:
    """The answer form: the prefix is `ok` in the object, `late` elsewhere in the reply; the body is
    the object's `text` (the whole reply when it is no JSON object)."""

    def split(self, reply: str, item: EvalItem) -> Any:
        from mrcr_gen.eval._answer import SplitReply

        found = reply_object(reply)
        body = str(found.get("text", "")) if found else reply
        if found.get("prefix") == item.prefix:
            return SplitReply("ok", body)
        return SplitReply("late" if item.prefix and item.prefix in reply else "missing", body)


def transcript(item: EvalItem) -> Any:
    """The row's writings for the failure analysis, each indexed by its message index."""
    from mrcr_gen.eval._analysis import Transcript, Writing

    row, offsets, writings = parse(item.messages), [0], []
    for message in item.messages:
        offsets.append(offsets[-1] + len(message["content"]))
    for i in range(1, len(item.messages) - 1, 2):
        ask, text = item.messages[i - 1]["content"], item.messages[i]["content"]
        form, _, entity = ask.removeprefix("write a ").partition(" about ")
        writings.append(Writing(index=i, text=text, ask=ask, format=form, entity=entity, offset=offsets[i - 1]))
    needles = tuple(n for n, w in enumerate(writings) if w.index in row.needles)
    return Transcript(tuple(writings), needles, row.k, item.prefix, offsets[-1], item.messages[-1]["content"])


def read_items(path: Any, *, tokenizer_spec: str, skip: Callable[[int, str], bool] | None) -> Iterator[EvalItem]:
    """The items of a mrcr-json parquet file, in row order (`skip(row, digest)`: yield a bare item)."""
    with pq.ParquetFile(path) as parquet:
        batches = parquet.iter_batches(
            batch_size=1, columns=["prompt", "answer", "random_string_to_prepend", "n_needles"]
        )
        for index, record in enumerate(r for batch in batches for r in batch.to_pylist()):
            prompt, answer, prefix, n_needles = record.values()
            digest = hashlib.sha256(json.dumps([prompt, answer, prefix]).encode()).hexdigest()
            base: dict[str, Any] = {"source": str(path), "row": index, "recipe": NAME, "digest": digest}
            try:
                messages = parse(json.loads(prompt)).messages if not (skip and skip(index, digest)) else None
            except (ValueError, TypeError) as exc:
                yield EvalItem(**base, error=ItemError(check="final_query", message=str(exc)))
                continue
            if messages is None:
                yield EvalItem(**base)
                continue
            counts = count_tokens_batch([m["content"] for m in messages] + [answer], tokenizer=tokenizer_spec)
            tokens = {"bin_upper": bin_upper_of_tokens(sum(counts)), "prompt_tokens": sum(counts[:-1])}
            extra = {"answer": answer, "prefix": prefix, "n_needles": n_needles, "total_tokens": sum(counts)}
            yield EvalItem(**base, messages=messages, **tokens, **extra)
