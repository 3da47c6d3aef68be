"""mrcr-json's checking declaration (`SPEC`): each row against the ground truth its prompt holds (the
random string, the needle count, the answer: the writing asked for) and its token bin; `--fix`
rebuilds the answer and the needle count from the prompt."""

from __future__ import annotations

import json
from typing import Any

from mrcr_gen.validate import CheckSpec, GroundTruth, ParquetRows

from ._answers import parse
from ._rows import SCHEMA


def truth(record: dict[str, Any]) -> tuple[list[dict], dict[str, Any]]:
    """The messages the prompt sends and the columns they determine; ValueError when it cannot tell them."""
    row = parse(json.loads(record["prompt"]))
    if not 1 <= row.k <= len(row.needles):
        raise ValueError(f"the query asks for needle {row.k} of {len(row.needles)}")
    answer = row.messages[row.needles[row.k - 1]]["content"]
    return row.messages, {"random_string_to_prepend": row.prefix, "n_needles": len(row.needles), "answer": answer}


CHECKS = ("file", "schema", "final_query", "needle_count", "answer", "token_bin")
GROUND_TRUTH = GroundTruth(
    truth,
    checks={"random_string_to_prepend": "final_query", "n_needles": "needle_count", "answer": "answer"},
    unreadable="final_query",
    fixable=frozenset({"n_needles", "answer"}),
)
SPEC = CheckSpec(
    ParquetRows(SCHEMA, frozenset({"n_needles"})), GROUND_TRUTH.checker, CHECKS, fix_record=GROUND_TRUTH.fix
)
