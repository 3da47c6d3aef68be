"""The local engine: results in unit order, the units' own errors re-raised, dead workers reported."""

from __future__ import annotations

import pytest

from mrcr_gen.engines import LocalEngine, TaskFailed, make_engine

from .units import always_die, fail_with, square


@pytest.mark.parametrize("workers", [1, 2])
def test_results_come_in_unit_order(workers: int) -> None:
    with LocalEngine(workers) as engine:
        assert list(engine.map(square, [(i,) for i in range(20)], window=3)) == [i * i for i in range(20)]


def test_a_units_own_error_is_raised_as_is() -> None:
    with LocalEngine(2) as engine, pytest.raises(ValueError, match="bad input"):
        list(engine.map(fail_with, [("bad input",)]))


def test_a_dead_worker_is_a_task_failed_not_a_traceback() -> None:
    with LocalEngine(2) as engine:
        outcomes = list(engine.map(always_die, [(1,), (2,)]))
    assert all(isinstance(o, TaskFailed) for o in outcomes) and [o.index for o in outcomes] == [0, 1]


def test_make_engine_names() -> None:
    assert make_engine("local", workers=3).workers == 3
    with pytest.raises(ValueError, match="unknown engine"):
        make_engine("spark")


def test_the_default_path_never_imports_ray() -> None:
    import subprocess
    import sys

    code = (
        "import sys, mrcr_gen, mrcr_gen.engines, mrcr_gen.cli._gen, mrcr_gen.cli._validate;"
        "from mrcr_gen.engines import make_engine; make_engine('local', workers=1);"
        "print('ray' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"
