"""Checks of the generator guarantees, made from outside the generator (for pool-built rows)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from mrcr_gen import BINS, MrcrRow, row_token_count, validate_row
from tests.generate.structure import assert_mrcr_structure


def check_row(record: dict, meta: dict | None = None) -> int:
    """Assert every guarantee of one generated row; return its exact o200k token count."""
    row = MrcrRow(**record)
    assert_mrcr_structure(row)
    total = row_token_count(json.loads(row.prompt), row.answer)
    if meta is not None:
        assert meta["n_tokens"] == total, "sidecar token count must equal an exact recount"
        assert total in next(b for b in BINS if str(b) == meta["bin"]), (total, meta["bin"])
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
