"""What the per-row analyses of a run add up to: outcome shares, ordinal confusion, depth x bin."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mrcr_gen.eval._failures import (
    OUTCOMES,
    failure_summary,
    prefix_kept,
    target_share,
    write_failure_plots,
    write_panel_plots,
)


def record(bin_label, n, returned, *, asked=1, got=None, depth=0.5, score=1.0, status="ok", prefix="ok"):
    if status in ("error", "skipped"):
        return {"bin": bin_label, "n_needles": n, "status": status, "score": None}
    analysis = {
        "returned": returned,
        "target_ordinal": asked,
        "returned_ordinal": got,
        "target_depth": depth,
        "prefix": prefix,
    }
    return {"bin": bin_label, "n_needles": n, "status": "ok", "score": score, "analysis": analysis}


SMALL, LARGE = "[4096, 8192]", "(8192, 16384]"


def test_counts_by_hand():
    records = [
        record(SMALL, 2, "target", asked=2, got=2, depth=0.05, score=1.0),
        record(SMALL, 2, "other_needle", asked=2, got=1, depth=0.95, score=0.4),
        record(SMALL, 2, "distractor", asked=1, depth=0.31, score=0.2),
        record(SMALL, 2, "x", status="error"),
        record(LARGE, 2, "not_in_context", asked=1, depth=0.35, score=0.0),
        record(LARGE, 2, "target", asked=1, got=1, depth=0.35, score=0.0, prefix="missing"),
        record(LARGE, 2, "x", status="skipped"),
        {"bin": LARGE, "n_needles": 2, "status": "ok", "score": 0.5},  # an older record: no analysis
    ]
    summary = failure_summary(records)
    assert summary["analysed_rows"] == 5
    (small, large) = summary["outcomes"]
    assert (small["bin"], small["count"], large["count"]) == (SMALL, 4, 3)
    assert small["shares"] == {
        "target": 0.25,
        "other_needle": 0.25,
        "distractor": 0.25,
        "not_in_context": 0.0,
        "empty": 0.0,
        "error": 0.25,
        "skipped": 0.0,
    }
    assert large["shares"]["skipped"] == round(1 / 3, 4) and large["shares"]["target"] == round(1 / 3, 4)
    # The target returned without its prefix (score 0) is told from the one returned whole.
    assert small["prefix"] == {"ok": 3, "late": 0, "missing": 0, "none": 1}
    assert large["prefix"] == {"ok": 1, "late": 0, "missing": 1, "none": 1}
    assert small["crossed"]["target"] == {"ok": 1, "late": 0, "missing": 0, "none": 0}
    assert large["crossed"]["target"] == {"ok": 0, "late": 0, "missing": 1, "none": 0}
    assert large["crossed"]["skipped"]["none"] == 1 and "empty" not in large["crossed"]
    assert target_share([small, large]) == round(2 / 7, 4) and target_share([small, large], "ok") == round(1 / 7, 4)
    assert prefix_kept([small, large]) == round(4 / 7, 4)
    (matrix,) = summary["ordinal_confusion"]
    assert matrix["returned"] == [1, 2, 0]
    assert matrix["counts"] == [[1, 0, 2], [1, 1, 0]]  # asked 1: a distractor and text not in context
    (depth,) = summary["depth"]  # one grid per needle count
    assert depth["n_needles"] == 2 and depth["bins"] == [SMALL, LARGE]
    assert depth["mean_score"][0] == [1.0, None] and depth["mean_score"][9] == [0.4, None]
    assert depth["mean_score"][3] == [0.2, 0.0] and depth["count"][3] == [1, 2]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([SMALL, LARGE]),
            st.sampled_from([2, 4, 8]),
            st.sampled_from(OUTCOMES),
            st.integers(1, 8),
            st.floats(0, 1),
            st.floats(0, 0.9999),
        ),
        max_size=40,
    )
)
def test_shares_sum_to_one_and_every_analysed_row_is_in_the_matrix(rows):
    records = []
    for label, n, outcome, asked, score, depth in rows:
        asked = min(asked, n)
        got = asked if outcome == "target" else (asked % n + 1 if outcome == "other_needle" else None)
        status = outcome if outcome in ("error", "skipped") else "ok"
        records.append(record(label, n, outcome, asked=asked, got=got, depth=depth, score=score, status=status))
    summary = failure_summary(records)
    assert sum(c["count"] for c in summary["outcomes"]) == len(records)
    for cell in summary["outcomes"]:
        assert abs(sum(cell["shares"].values()) - 1) < 1e-3
    analysed = [r for r in records if "analysis" in r]
    assert summary["analysed_rows"] == len(analysed)
    assert sum(sum(map(sum, m["counts"])) for m in summary["ordinal_confusion"]) == len(analysed)
    assert sum(sum(map(sum, grid["count"])) for grid in summary["depth"]) == len(analysed)
    for cell in summary["outcomes"]:
        assert sum(cell["prefix"].values()) == cell["count"]
        assert sum(sum(states.values()) for states in cell["crossed"].values()) == cell["count"]
    for m in summary["ordinal_confusion"]:
        diagonal = sum(m["counts"][k][k] for k in range(m["n_needles"]))
        assert diagonal == sum(
            1 for r in analysed if r["n_needles"] == m["n_needles"] and r["analysis"]["returned"] == "target"
        )


def test_plots_are_written_even_without_analysed_rows(tmp_path):
    full = failure_summary(
        [record(SMALL, 2, "target", asked=1, got=1), record(LARGE, 4, "other_needle", asked=3, got=1)]
    )
    names = write_failure_plots(full, tmp_path, "m")
    assert all((tmp_path / n).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for n in names)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert all((empty / n).stat().st_size > 1000 for n in write_failure_plots(failure_summary([]), empty, "m"))
    panels = tmp_path / "panels"
    panels.mkdir()
    names = write_panel_plots(full, panels, "m")
    assert names == [f"plot_{kind}-{n}.png" for kind in ("outcomes", "ordinals", "depth") for n in (2, 4)]
    assert all((panels / n).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for n in names)
