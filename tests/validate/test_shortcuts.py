"""`mrcr-validate --shortcuts`: the probes, their expectation under uniform needle placement, and
the `shortcut` finding (stratified placement is one; uniform placement is not)."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcr_gen.recipes import recipe_named
from mrcr_gen.recipes.openai_mrcr._probes import PROBES as OPENAI_PROBES
from mrcr_gen.recipes.openai_mrcr._validate import SPEC
from mrcr_gen.validate import validate_paths
from mrcr_gen.validate._shortcuts import (
    MIN_ROWS,
    PROBES,
    ProbeRow,
    ProbeSpec,
    _depth_choice,
    depth_hits,
    measure,
    probe_record,
)
from tests.support.rowkit import MUTATIONS, make_row, write_rows
from tests.validate.test_cli import run

REAL = Path(__file__).resolve().parents[2] / ".." / "shared" / "mrcr-real" / "mrcr_real_rows.parquet"


def stratified(seed: int, n: int, pairs: int) -> list[int]:
    """Needle j in the j-th of n equal strata of the pairs (the placement issue 33 found)."""
    rng = random.Random(seed)
    edges = [round(pairs * j / n) for j in range(n + 1)]
    return [rng.randrange(edges[j], edges[j + 1]) for j in range(n)]


def rows_file(path: Path, n: int, rows: int, placement: str, base: int = 0, pairs: int = 40) -> Path:
    made = []
    for s in range(base, base + rows):
        slots = stratified(s, n, pairs) if placement == "stratified" else None
        made.append(make_row(s, n_needles=n, pairs=pairs, slots=slots))
    return write_rows(path, made)


def shortcut_findings(path: Path) -> list:
    report = validate_paths([path], spec=SPEC, tokens=False, shortcuts=True)
    return [f for f in report.findings if f.check == "shortcut"]


def test_stratified_needles_are_a_shortcut(tmp_path: Path) -> None:
    found = shortcut_findings(rows_file(tmp_path / "s.parquet", 8, 60, "stratified"))
    assert any("probe 'depth'" in f.message and "8 needles" in f.message for f in found)
    assert all(f.is_error and f.row is None for f in found)


@settings(max_examples=4, deadline=None)
@given(base=st.integers(0, 10_000), n=st.sampled_from([2, 4, 8]))
def test_uniform_needles_are_no_shortcut(tmp_path_factory, base: int, n: int) -> None:
    path = rows_file(tmp_path_factory.mktemp("u") / "u.parquet", n, 60, "uniform", base=base)
    assert shortcut_findings(path) == []


def test_too_few_rows_are_never_a_finding(tmp_path: Path) -> None:
    assert shortcut_findings(rows_file(tmp_path / "s.parquet", 8, MIN_ROWS - 1, "stratified")) == []


def _row(needles: list[str], slots: list[int], k: int, n_slots: int = 20) -> ProbeRow:
    writings = [f"filler writing {i} " * 3 for i in range(n_slots)]
    for text, slot in zip(needles, slots, strict=True):
        writings[slot] = text
    return ProbeRow(needles=tuple(needles), slots=tuple(slots), n_slots=n_slots, k=k, writings=tuple(writings))


def _score(reply: str, target: str) -> float:
    return OPENAI_PROBES.score(reply, target)


def test_expectations_are_exact_for_the_simple_probes() -> None:
    needles = ["alpha beta gamma", "completely different text", "alpha beta delta"]
    row = _row(needles, [2, 9, 15], k=1)
    outcome = measure(row, _score)
    others = [_score(needles[1], needles[0]), _score(needles[2], needles[0])]
    assert outcome.observed["first"] == 1.0 and outcome.expected["first"] == 1.0 and outcome.variance["first"] == 0
    assert outcome.observed["last"] == others[1] and outcome.expected["last"] == pytest.approx(sum(others) / 2)
    assert outcome.expected["random"] == pytest.approx(1 / 3 + 2 / 3 * sum(others) / 2)
    longest = needles.index(max(needles, key=len))
    against = [1.0 if j == longest else _score(needles[longest], w) for j, w in enumerate(needles)]
    assert outcome.observed["longest"] == outcome.observed["first"] * 0 + (1.0 if longest == 0 else others[longest - 1])
    assert outcome.expected["longest"] == pytest.approx(sum(against) / 3)
    assert set(outcome.observed) == set(PROBES) == set(outcome.expected) == set(outcome.variance)


def test_the_final_turn_probe_reads_the_last_writing() -> None:
    row = _row(["needle one text", "needle two text"], [3, 19], k=2)
    assert measure(row, _score).observed["final_turn"] == 1.0  # the last turn is the 2nd needle
    row = _row(["needle one text", "needle two text"], [3, 10], k=2)
    assert measure(row, _score).observed["final_turn"] == _score(row.writings[-1], "needle two text")


@pytest.mark.parametrize(("n", "n_slots"), [(2, 5), (3, 6), (4, 7)])
def test_the_depth_simulation_agrees_with_enumeration(n: int, n_slots: int) -> None:
    exact = [0.0] * n
    subsets = list(itertools.combinations(range(n_slots), n))
    for subset in subsets:
        choices = [int(_depth_choice((np.asarray(subset) + 0.5) / n_slots, k, n)) for k in range(1, n + 1)]
        for k, c in enumerate(choices):
            exact[k] += (c == k) / len(subsets)
    assert depth_hits(n, n_slots) == pytest.approx(exact, abs=0.03)


def test_many_slots_are_simulated_without_repeats() -> None:
    hits = depth_hits(8, 5000)
    # Issue 33 simulated 45% for 8 needles placed uniformly; the ends are easier than the middle, alike.
    assert len(hits) == 8 and 0.42 < sum(hits) / 8 < 0.48
    assert all(abs(hits[k] - hits[7 - k]) < 0.04 for k in range(4)) and hits[0] > hits[3]


def test_rows_the_checks_reject_are_skipped_and_counted(tmp_path: Path) -> None:
    rows = [make_row(s, n_needles=2) for s in range(4)]
    rows[1] = MUTATIONS["answer_distractor"][0](rows[1])
    rows[2] = MUTATIONS["broken_json"][0](rows[2])
    report = validate_paths([write_rows(tmp_path / "m.parquet", rows)], spec=SPEC, tokens=False, shortcuts=True)
    shortcuts = report.summary.shortcuts
    assert shortcuts is not None and shortcuts.skipped == {"a check rejected the row": 2}
    assert {g.rows for g in shortcuts.groups} == {2}


def test_a_row_the_probes_cannot_read_is_skipped_never_raised() -> None:
    def broken(record: dict) -> ProbeRow:
        raise KeyError("prompt")

    assert probe_record(ProbeSpec(row=broken, score=_score), {}).skipped == "unreadable: KeyError"
    assert probe_record(ProbeSpec(row=lambda r: None, score=_score), {}).skipped is not None


def test_cli_exit_1_and_json(capsys, tmp_path: Path) -> None:
    path = rows_file(tmp_path / "s.parquet", 8, 40, "stratified")
    code, out, err = run(capsys, path, "--no-tokens", "--shortcuts", "--json", "-")
    assert code == 1
    report = json.loads(out)
    groups = report["summary"]["shortcuts"]["groups"]
    depth = next(g for g in groups if g["probe"] == "depth")
    assert depth["rows"] == 40 and depth["shortcut"] and depth["n_needles"] == "8" and depth["bin"] == "not counted"
    assert depth["observed"] > depth["expected"] + 0.05 and depth["floor"] is not None
    assert report["summary"]["by_check"] == {"shortcut": sum(g["shortcut"] for g in groups)}
    assert "shortcut probes" in err


def test_cli_without_shortcuts_has_no_probes(capsys, tmp_path: Path) -> None:
    path = rows_file(tmp_path / "s.parquet", 8, 40, "stratified")
    code, out, _ = run(capsys, path, "--no-tokens", "--json", "-")
    assert code == 0 and "shortcuts" not in json.loads(out)["summary"]


def test_cli_refuses_shortcuts_with_clean(capsys, tmp_path: Path) -> None:
    path = rows_file(tmp_path / "s.parquet", 2, 3, "uniform")
    code, _, err = run(capsys, path, "--shortcuts", "--clean", tmp_path / "out.parquet")
    assert code == 2 and err.count("\n") == 1 and "--shortcuts" in err
    assert not (tmp_path / "out.parquet").exists()


def test_a_recipe_may_declare_no_probes() -> None:
    from mrcr_gen.validate import CheckSpec

    assert CheckSpec.__dataclass_fields__["probes"].default is None
    assert recipe_named("openai-mrcr").checking().probes is not None
    assert recipe_named("mrcr-v2").checking().probes is not None


@pytest.mark.skipif(not REAL.is_file(), reason="the real rows in ../shared/mrcr-real are absent")
def test_real_rows_are_probed_without_a_finding() -> None:
    report = validate_paths([REAL], spec=SPEC, tokens=False, shortcuts=True)
    shortcuts = report.summary.shortcuts
    assert shortcuts is not None and sum(g.rows for g in shortcuts.groups if g.probe == "depth") == 3
    assert not [f for f in report.findings if f.check == "shortcut"]  # 3 rows: too few to be one


@settings(max_examples=40, deadline=None)
@given(data=st.data(), n=st.integers(1, 8), extra=st.integers(0, 30))
def test_every_outcome_is_a_score_with_its_moments(data, n: int, extra: int) -> None:
    n_slots = n + extra
    slots = sorted(data.draw(st.sets(st.integers(0, n_slots - 1), min_size=n, max_size=n)))
    texts = st.text(alphabet="abc de", max_size=40)
    needles = data.draw(st.lists(texts, min_size=n, max_size=n, unique=True))
    k = data.draw(st.integers(1, n))
    outcome = measure(_row(needles, slots, k, n_slots), _score)
    for probe in PROBES:
        assert 0 <= outcome.observed[probe] <= 1 and 0 <= outcome.expected[probe] <= 1 + 1e-9
        assert outcome.variance[probe] >= 0
    if n == 1:  # one needle: every needle probe is right
        assert all(outcome.observed[p] == outcome.expected[p] == 1 for p in PROBES if p != "final_turn")


def test_the_probe_table_fits_a_pipe_s_80_columns_without_cutting_a_cell():
    import io

    from rich.console import Console

    from mrcr_gen.cli._validate import _shortcut_table
    from mrcr_gen.validate._shortcuts import ShortcutGroup, ShortcutReport

    group = ShortcutGroup(
        probe="final_turn",
        bin="(524288, 1048576]",
        n_needles="8",
        rows=120,
        observed_sum=-12.0,
        expected_sum=60.0,
        variance_sum=30.0,
        floor_sum=2.0,
        floor_rows=120,
    )
    buffer = io.StringIO()
    _shortcut_table(ShortcutReport(groups=[group]), Console(file=buffer, width=80))
    lines = buffer.getvalue().splitlines()
    assert max(map(len, lines)) <= 80 and "…" not in buffer.getvalue()
    assert any("(524288, 1048576]" in line and "final_turn" in line and "-0.100" in line for line in lines)
