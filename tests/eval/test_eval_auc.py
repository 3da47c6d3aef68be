"""AUC as Context Arena computes it, pinned on hand-computed cases."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrcr_gen._bins import BINS
from mrcr_gen.eval import summarize_records
from mrcr_gen.eval._auc import AUC_1M_EDGES, AUC_128K_EDGES, auc, auc_fields


def test_edges():
    assert AUC_128K_EDGES == (8192, 16384, 32768, 65536, 131072)
    assert AUC_1M_EDGES == (8192, 16384, 32768, 65536, 131072, 262144, 524288, 1048576)


def test_hand_computed_128k():
    means = dict(zip(AUC_128K_EDGES, [1.0, 1.0, 0.5, 0.5, 0.0]))
    # (8192*(1+1) + 16384*(1+.5) + 32768*(.5+.5) + 65536*(.5+0)) / 2 / (131072 - 8192)
    assert auc(means, AUC_128K_EDGES) == pytest.approx(53248 / 122880)
    assert auc(means, AUC_128K_EDGES) == pytest.approx(0.4333333333)


def test_hand_computed_1m_with_a_window():
    means = {8192: 0.8, 16384: 0.6, 32768: 0.4, 65536: 0.4, 131072: 0.2, 262144: 0.1}
    # The window ends at 262144: bins (262144, 524288] and (524288, 1048576] count 0 without rows.
    area = (8192 * 1.4 + 16384 * 1.0 + 32768 * 0.8 + 65536 * 0.6 + 131072 * 0.3 + 262144 * 0.1 + 524288 * 0.0) / 2
    assert auc(means, AUC_1M_EDGES, max_context_window=262144) == pytest.approx(area / (1048576 - 8192))
    assert area / (1048576 - 8192) == pytest.approx(0.0763780, rel=1e-5)
    # Without the window those bins are in range and unmeasured: no AUC.
    assert auc(means, AUC_1M_EDGES) is None
    # A window inside a bin keeps that bin in range.
    assert auc(means, AUC_1M_EDGES, max_context_window=300000) is None


def test_missing_bin_in_range_is_null_and_pointwise_means():
    means = {8192: 1.0, 16384: 1.0, 65536: 1.0, 131072: 0.5}
    assert auc(means, AUC_128K_EDGES) is None
    fields = auc_fields({**means, 32768: 1.0}, max_context_window=200000)
    # 200000 lies inside (131072, 262144]: that bin is in range and unmeasured; the 1M bin is beyond.
    assert fields["mean_128k"] == 0.5 and fields["mean_1m"] == 0.0 and fields["auc_1m"] is None
    assert fields["auc_128k"] == pytest.approx((8192 * 2 + 16384 * 2 + 32768 * 2 + 65536 * 1.5) / 2 / 122880)


@given(st.floats(min_value=0, max_value=1))
def test_a_flat_curve_has_its_own_value(score):
    means = dict.fromkeys(AUC_1M_EDGES, score)
    assert auc(means, AUC_1M_EDGES) == pytest.approx(score)
    assert auc(means, AUC_128K_EDGES) == pytest.approx(score)


def _record(upper: int, n_needles: int, score: float | None) -> dict:
    label = next(b.label for b in BINS if b.upper == upper)
    base = {"file": "f", "row": hash((upper, n_needles, score, id(object()))), "bin": label, "bin_upper": upper,
            "n_needles": n_needles}
    if score is None:
        return base | {"status": "error", "error": "HTTP 500"}
    return base | {"status": "ok", "score": score, "response": "x"}


def test_summary_auc_overall_and_per_needles_with_errors_as_zero():
    records = []
    for upper, (two, eight) in zip(AUC_128K_EDGES, [(1.0, 1.0), (1.0, 0.5), (1.0, None), (0.5, 0.5), (0.5, 0.0)]):
        records += [_record(upper, 2, two), _record(upper, 8, eight)]
    summary = summarize_records(records, {"max_context_window": None})
    by = {entry["n_needles"]: entry for entry in summary["by_needles"]}
    assert by[2]["auc_128k"] == pytest.approx((8192 * 2 + 16384 * 2 + 32768 * 1.5 + 65536 * 1.0) / 2 / 122880)
    # The error in the 32768 bin counts 0.
    assert by[8]["auc_128k"] == pytest.approx((8192 * 1.5 + 16384 * 0.5 + 32768 * 0.5 + 65536 * 0.5) / 2 / 122880)
    overall = [1.0, 0.75, 0.5, 0.5, 0.25]
    area = sum((b - a) * (x + y) / 2 for a, b, x, y in zip(AUC_128K_EDGES, AUC_128K_EDGES[1:], overall, overall[1:]))
    assert summary["auc_128k"] == pytest.approx(area / 122880)
    assert summary["mean_128k"] == 0.25 and summary["auc_1m"] is None and summary["mean_1m"] is None
    assert summary["mean_score"] == pytest.approx(sum([1, 1, 1, .5, 1, 0, .5, .5, .5, 0]) / 10)
    assert summary["mean_score_answered"] == pytest.approx(sum([1, 1, 1, .5, 1, .5, .5, .5, 0]) / 9)
    assert not summary["complete"]
