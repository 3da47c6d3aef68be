"""Issue 19, items 3, 6 and 7: what each number counts (skipped rows, errors), the cost of a run,
and the labels of `compare`."""

from __future__ import annotations

import json

import pytest

from mrcr_gen import iter_rows, run_eval
from mrcr_gen import summarize_run as summarize
from mrcr_gen._bins import BINS
from mrcr_gen.eval import summarize_records
from mrcr_gen.eval._auc import AUC_128K_EDGES, trapezoid_auc
from tests.support.chat_server import ChatServer

from .test_eval_runner import config, results

# ----------------------------------------------------------------------- item 3: skipped rows in a bin


def _label(upper: int) -> str:
    return next(b.label for b in BINS if b.upper == upper)


def _row(upper: int, row: int, status: str, n_needles: int = 2) -> dict:
    base = {"file": "f", "row": row, "bin": _label(upper), "bin_upper": upper, "n_needles": n_needles}
    if status == "ok":
        return base | {"status": "ok", "score": 1.0, "response": "x"}
    if status == "skipped":
        return base | {"status": "skipped", "reason": "context", "max_context_window": 100_000}
    return base | {"status": "error", "error": "HTTP 500"}


def test_skipped_rows_count_zero_in_bin_means_and_auc_but_not_in_mean_score():
    # An always-right model; the window (100000) lies inside the 128k bin, whose 3 longest rows are skipped.
    records = [_row(upper, upper + i, "ok") for upper in AUC_128K_EDGES[:-1] for i in range(4)]
    records += [_row(131072, 1, "ok")] + [_row(131072, 2 + i, "skipped") for i in range(3)]
    summary = summarize_records(records, {"max_context_window": 100_000})
    assert summary["mean_score"] == 1.0 and summary["n_rows"] == 17  # the official loop's rule
    assert summary["mean_128k"] == 0.25
    assert summary["auc_128k"] == pytest.approx(trapezoid_auc(list(AUC_128K_EDGES), [1, 1, 1, 1, 0.25]))
    assert summary["mean_1m"] == 0.0  # no rows beyond the window: 0, as before
    bins = {b["bin_upper"]: b for b in summary["bins"]}
    assert bins[131072] == {"bin": _label(131072), "bin_upper": 131072, "count": 4, "skipped": 3, "mean_score": 0.25}
    (cell,) = [c for c in summary["cells"] if c["bin_upper"] == 131072]
    assert (cell["count"], cell["errors"], cell["skipped"], cell["mean_score"]) == (4, 0, 3, 0.25)
    (two,) = summary["by_needles"]
    assert two["mean_score"] == 1.0 and two["count"] == 17 and two["skipped"] == 3 and two["mean_128k"] == 0.25
    assert two["auc_128k"] == summary["auc_128k"]


def test_a_bin_beyond_the_window_is_its_rows_mean():
    # o200k prompt tokens decide the window, prompt+answer the bin: a row of a bin beyond the window
    # can still fit and be scored; its score counts, the bin's skipped rows count 0.
    records = [_row(upper, upper, "ok") for upper in AUC_128K_EDGES[:-1]]
    records += [_row(131072, 1, "ok"), _row(131072, 2, "skipped")]
    summary = summarize_records(records, {"max_context_window": 65536})
    assert summary["mean_128k"] == 0.5
    # Only skipped rows, or none at all: 0.
    only_skipped = summarize_records(records[:-2] + [_row(131072, 2, "skipped")], {"max_context_window": 65536})
    assert only_skipped["mean_128k"] == 0.0
    assert summarize_records(records[:-2], {"max_context_window": 65536})["mean_128k"] == 0.0


def test_a_run_with_a_window_inside_a_bin(gen_data, tmp_path, api_key):
    """End to end: rows over the window are skipped; the bin's mean (table, plot, compare) counts them 0."""
    with ChatServer("oracle") as server:
        run_eval(config([gen_data], tmp_path / "all", server))
    tokens = sorted(r["o200k_prompt_tokens"] for r in results(tmp_path / "all"))
    window = tokens[len(tokens) // 2]  # inside the [4096, 8192] bin: some rows fit, some do not
    with ChatServer("oracle") as server:
        _, summary = run_eval(config([gen_data], tmp_path / "run", server, max_context_window=window))
    fit = sum(1 for t in tokens if t <= window)
    assert 0 < fit < len(tokens) == len(list(iter_rows(gen_data)))
    assert summary["mean_score"] == 1.0 and summary["n_scored"] == fit
    (only,) = summary["bins"]
    assert only["count"] == len(tokens) and only["mean_score"] == pytest.approx(fit / len(tokens))
    assert sum(c["count"] for c in summary["cells"]) == len(tokens)
    assert sum(c["mean_score"] * c["count"] for c in summary["cells"]) == pytest.approx(fit)
