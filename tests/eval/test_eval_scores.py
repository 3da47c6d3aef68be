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
    only_skipped = summarize_records([*records[:-2], _row(131072, 2, "skipped")], {"max_context_window": 65536})
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


# ----------------------------------------------------------------------- item 6: cost


def _cost(summary: dict, price_in: float, price_out: float) -> float:
    usage = summary["usage"]
    return (usage["prompt_tokens"] * price_in + usage["completion_tokens"] * price_out) / 1e6


def _eval_args(data, out, server, *extra: str) -> list[str]:
    return [str(data), "--model", "test-model", "--base-url", server.base_url, "--out", str(out), "-q", *extra]


def test_prices_given_once_are_kept_by_a_resume(small_data, tmp_path, capsys, api_key):
    from mrcr_gen.cli._eval import eval_main

    from .test_eval_cli import call

    out = tmp_path / "run"
    with ChatServer("oracle") as server:
        code, _, _ = call(
            eval_main,
            _eval_args(small_data, out, server, "--limit", "4", "--price-in", "1", "--price-out", "4"),
            capsys,
        )
        assert code == 0
        # The same run resumed (and extended) without the prices: they are kept.
        code, _, err = call(eval_main, _eval_args(small_data, out, server, "--limit", "6"), capsys)
        assert code == 0, err
        summary = json.loads((out / "summary.json").read_text())
        assert summary["n_scored"] == 6 and summary["price_per_1m"] == {"input": 1.0, "cached_input": 1.0, "output": 4.0}
        assert summary["cost_usd"] == pytest.approx(_cost(summary, 1.0, 4.0)) and summary["cost_usd"] > 0
        # A resume with other prices reports what a fresh run with them would.
        sent = server.total_requests
        code, _, _ = call(
            eval_main,
            _eval_args(small_data, out, server, "--limit", "6", "--price-in", "3", "--price-out", "5"),
            capsys,
        )
        assert code == 0 and server.total_requests == sent == 6
    summary = json.loads((out / "summary.json").read_text())
    assert summary["price_per_1m"] == {"input": 3.0, "cached_input": 3.0, "output": 5.0}
    assert summary["cost_usd"] == pytest.approx(_cost(summary, 3.0, 5.0))
    assert summarize(out)["cost_usd"] == summary["cost_usd"]  # `mrcr-eval report` too


@pytest.mark.parametrize("flag", ["--price-in", "--price-out"])
def test_one_price_flag_for_a_model_without_a_list_price_is_refused(small_data, tmp_path, capsys, api_key, flag):
    from mrcr_gen.cli._eval import eval_main

    from .test_eval_cli import call

    with ChatServer("oracle") as server:
        code, _, err = call(eval_main, _eval_args(small_data, tmp_path / "run", server, flag, "2"), capsys)
        assert server.total_requests == 0
    other = "--price-out" if flag == "--price-in" else "--price-in"
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert f"{flag} without {other}: the list price of 'test-model' is not known" in err


def test_one_price_flag_for_a_listed_model_takes_the_other_from_the_table():
    from mrcr_gen._prices import price_for

    assert price_for("gpt-4.1", None, 9.0) == (2.0, 9.0) and price_for("gpt-4.1", 1.0) == (1.0, 8.0)


def test_only_names_the_table_lists_are_priced():
    from mrcr_gen._prices import PRICES, price_for

    assert price_for("gpt-4o-2024-08-06") == PRICES["gpt-4o-2024-08-06"]
    # A snapshot the table does not list is not priced as its alias (gpt-4o-2024-05-13 cost more).
    assert price_for("gpt-4o-2024-05-13") is None and price_for("gpt-4.1-2025-04-14") is None

    from mrcr_gen._prices import PriceError
    from mrcr_gen.eval import EvalConfig

    assert EvalConfig(data=["x"], model="gpt-4o-2024-05-13", out="o").price_per_1m is None
    with pytest.raises(PriceError, match="--price-in without --price-out"):
        price_for("gpt-4o-2024-05-13", price_in=5.0)
    assert price_for("gpt-4o-2024-05-13", 5.0, 15.0) == (5.0, 15.0)


# ----------------------------------------------------------------------- item 7: compare, --bin, settings message


def test_two_bins_with_one_upper_edge_get_two_headers():
    from rich.console import Console

    from mrcr_gen.eval import compare_table
    from mrcr_gen.eval._report import bin_headers

    assert bin_headers(["[4096, 8192]", "(8192, 16384]", "(524288, 1048576]"]) == ["8k", "16k", "1M"]
    assert bin_headers(["(4096, 8192]", "[4096, 8192]", "(8192, 16384]", "(4194304, 8388608]"]) == [
        "(4k, 8k]",
        "[4k, 8k]",
        "16k",
        "8M",
    ]
    entries = [
        {
            "run": "a",
            "model": "m",
            "rows": 2,
            "mean_score": 1.0,
            "auc_128k": None,
            "auc_1m": None,
            "bins": {"[4096, 8192]": 1.0},
            "errors": 0,
            "cost_usd": None,
            "complete": True,
            "official": True,
        },
        {
            "run": "b",
            "model": "m",
            "rows": 2,
            "mean_score": 0.5,
            "auc_128k": None,
            "auc_1m": None,
            "bins": {"(4096, 8192]": 0.5},
            "errors": 0,
            "cost_usd": None,
            "complete": True,
            "official": True,
        },
    ]
    console = Console(width=240, record=True)
    console.print(compare_table(entries))
    header = next(line for line in console.export_text().splitlines() if "AUC@128k" in line)
    assert "[4k, 8k]" in header and "(4k, 8k]" in header and " 8k " not in header


def test_a_changed_request_names_only_what_changed(small_data, tmp_path, capsys, api_key):
    from mrcr_gen.cli._eval import eval_main

    from .test_eval_cli import call

    out = tmp_path / "run"
    with ChatServer("oracle") as server:
        assert call(eval_main, _eval_args(small_data, out, server, "--limit", "1"), capsys)[0] == 0
        code, _, err = call(
            eval_main, _eval_args(small_data, out, server, "--limit", "1", "--temperature", "0"), capsys
        )
    assert code == 2 and "(request.temperature: (not set) -> 0.0);" in err and "request: {}" not in err
