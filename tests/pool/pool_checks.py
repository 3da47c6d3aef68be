"""Checks of the generator guarantees, made from outside the generator (for pool-built rows)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow.parquet as pq

from mrcr_gen import BINS, count_tokens_batch

QUERY = re.compile(
    r"^Prepend (?P<rs>[A-Za-z0-9]{10}) to the (?P<k>[0-9]+)(?:st|nd|rd|th) \(1 indexed\) (?P<what>.+)\. "
    r"Do not include any other text in your response\.$",
    re.DOTALL,
)
REAL_ROWS = Path("/work/shared/mrcr-real/mrcr_real_rows.parquet")


def check_row(record: dict, meta: dict | None = None) -> int:
    """Assert every guarantee of one generated row; return its exact o200k token count."""
    messages = json.loads(record["prompt"])
    assert [m["role"] for m in messages] == ["user"] + ["user", "assistant"] * ((len(messages) - 2) // 2) + ["user"]
    match = QUERY.match(messages[-1]["content"])
    assert match, messages[-1]["content"]
    ask = "write a " + match["what"]
    needle_indices = [i for i, m in enumerate(messages[1:-1], start=1) if m["role"] == "user" and m["content"] == ask]
    assert len(needle_indices) == record["n_needles"]
    needle_texts = [messages[i + 1]["content"] for i in needle_indices]
    assert len(set(needle_texts)) == len(needle_texts), "needle writings must be distinct"
    k = int(match["k"])
    assert record["desired_msg_index"] == needle_indices[k - 1]
    assert record["answer"] == record["random_string_to_prepend"] + messages[record["desired_msg_index"] + 1]["content"]
    assert match["rs"] == record["random_string_to_prepend"]
    assert all(record["random_string_to_prepend"] not in m["content"] for m in messages[:-1])
    assert record["total_messages"] == len(messages)
    assert record["n_chars"] == sum(len(m["content"]) for m in messages)
    total = sum(count_tokens_batch([m["content"] for m in messages] + [record["answer"]]))
    if meta is not None:
        assert meta["n_tokens"] == total, "sidecar token count must equal an exact recount"
        label = meta["bin"]
        bin_ = next(b for b in BINS if str(b) == label)
        assert total in bin_, (total, label)
    try:  # the project's validator, when present, must agree
        from mrcr_gen import validate_row
    except ImportError:
        return total
    errors = [f for f in validate_row(record) if f.severity == "error"]
    assert not errors, errors
    return total


def check_dataset(out: Path) -> int:
    """Check every row of every parquet file under `out` against its sidecar; return the row count."""
    n = 0
    for path in sorted(out.rglob("*needle_*.parquet")):
        records = pq.read_table(path).to_pylist()
        sidecar = path.with_name(path.name.removesuffix(".parquet") + ".samples.jsonl")
        metas = [json.loads(line) for line in sidecar.read_text().splitlines()]
        assert len(metas) == len(records)
        for record, meta in zip(records, metas):
            check_row(record, meta)
            n += 1
    return n
