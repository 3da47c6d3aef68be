"""The local engine: results in unit order, progress passed on, the units' own errors re-raised,
units whose worker died run again, and reported when they still fail."""

from __future__ import annotations

import pytest

from mrcr_gen.engines import LocalEngine, TaskFailed, make_engine

from .units import always_die, die_once, fail_with, report_steps, square, square_unless_marked


@pytest.mark.parametrize("workers", [1, 2])
def test_results_come_in_unit_order(workers: int) -> None:
    with LocalEngine(workers) as engine:
        assert list(engine.map(square, [(i,) for i in range(20)], window=3)) == [i * i for i in range(20)]


@pytest.mark.parametrize("workers", [1, 2])
def test_every_progress_report_reaches_the_caller_before_its_units_result(workers: int) -> None:
    reports: list[tuple[int, int]] = []
    with LocalEngine(workers) as engine:
        units = [(steps,) for steps in (3, 0, 40, 7, 1)]
        results = engine.map(report_steps, units, window=2, on_progress=lambda *report: reports.append(report))
        for index, result in enumerate(results):
            assert sum(steps for i, steps in reports if i == index) == result
    assert sorted(set(reports)) == [(0, 1), (2, 1), (3, 1), (4, 1)] and len(reports) == 51


def test_every_worker_starts_with_the_first_unit() -> None:
    """Not the second only when a unit is submitted while the first is busy: a generation's first
    unit is its up-front check, after which every worker is wanted at once."""
    with LocalEngine(3) as engine:
        assert list(engine.map(square, [(4,)])) == [16]
        assert engine._pool is not None and len(engine._pool._processes) == 3  # type: ignore[attr-defined]


def test_reports_nobody_listens_to_are_dropped_not_queued() -> None:
    # Queued, 200,000 reports would fill the pipe to the caller and block the worker for good.
    with LocalEngine(2) as engine:
        assert list(engine.map(report_steps, [(100_000,), (100_000,)])) == [100_000, 100_000]
        reports: list[tuple[int, int]] = []
        assert list(engine.map(report_steps, [(2,)], on_progress=lambda *r: reports.append(r))) == [2]
    assert reports == [(0, 1), (0, 1)]


def test_a_units_own_error_is_raised_as_is() -> None:
    with LocalEngine(2) as engine, pytest.raises(ValueError, match="bad input"):
        list(engine.map(fail_with, [("bad input",)]))


def test_a_dead_worker_is_a_task_failed_not_a_traceback() -> None:
    with LocalEngine(2) as engine:
        outcomes = list(engine.map(always_die, [(1,), (2,)]))
    assert all(isinstance(o, TaskFailed) for o in outcomes) and [o.index for o in outcomes] == [0, 1]


def test_a_unit_whose_worker_died_runs_again(tmp_path) -> None:
    with LocalEngine(2) as engine:
        assert list(engine.map(die_once, [(i, str(tmp_path)) for i in range(5)])) == [0, 1, 4, 9, 16]
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"died-{i}" for i in range(5)]  # each died once


@pytest.mark.parametrize("max_retries", [0, 2])
def test_only_the_unit_that_kills_its_worker_fails_after_its_retries(tmp_path, max_retries: int) -> None:
    with LocalEngine(2, max_retries=max_retries) as engine:
        outcomes = list(engine.map(square_unless_marked, [(x, 3, str(tmp_path)) for x in range(8)], window=4))
    assert [o for x, o in enumerate(outcomes) if x != 3] == [x * x for x in range(8) if x != 3]
    assert isinstance(outcomes[3], TaskFailed) and outcomes[3].index == 3
    runs = sorted(int(p.name.split("-")[0]) for p in tmp_path.iterdir())
    # Alone, it died max_retries + 1 times; before that, it may have died beside other units.
    assert max_retries + 1 <= runs.count(3) <= max_retries + 2


def test_workers_that_die_as_they_start_fail_the_units_instead_of_looping(monkeypatch) -> None:
    import mrcr_gen.engines._local as local_module

    from .units import fail_to_start

    monkeypatch.setattr(local_module, "_start_worker", fail_to_start)  # the pool's initializer
    with LocalEngine(2, max_retries=1) as engine:
        outcomes = list(engine.map(square, [(1,), (2,)]))
    assert [o.index for o in outcomes if isinstance(o, TaskFailed)] == [0, 1]
    assert all("die as they start" in o.message for o in outcomes)


@pytest.mark.parametrize(("tokenizer", "built"), [("o200k_base", True), ("hf:any/model", False)])
def test_generation_workers_start_with_o200k_built_only_when_it_counts(tokenizer: str, built: bool) -> None:
    import subprocess
    import sys
    from pathlib import Path

    # A fresh process: a fork server keeps the preload it was started with.
    code = (
        "import sys; from mrcr_gen.engines import LocalEngine; from mrcr_gen.recipes.openai_mrcr._generate import worker_preload;"
        "from tests.engines.units import o200k_built;"
        "engine = LocalEngine(2, preload=worker_preload(sys.argv[1]));"
        "print(list(engine.map(o200k_built, [()]))[0]); engine.close()"
    )
    root = Path(__file__).parents[2]
    out = subprocess.run([sys.executable, "-c", code, tokenizer], capture_output=True, text=True, check=True, cwd=root)
    assert out.stdout.strip() == str(built)


def test_generation_workers_start_with_the_pools_a_child_of_their_server_rendered() -> None:
    """The fork server takes the pools from the child it forked (`_preload_start`), with their
    letter titles: workers start with them, without Faker, their heap kept from the collector, and
    with the default catalog's asks counted."""
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "from mrcr_gen.engines import LocalEngine; from mrcr_gen.recipes.openai_mrcr._generate import worker_preload;"
        "from tests.engines.units import started_warm;"
        "engine = LocalEngine(2, preload=worker_preload());"
        "print(*list(engine.map(started_warm, [()]))[0]); engine.close()"
    )
    root = Path(__file__).parents[2]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root)
    assert out.stdout.split() == ["True", "False", "True", "True"]


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


def test_writings_composed_once_and_shared_give_the_same_bytes(tmp_path, monkeypatch) -> None:
    import hashlib

    from mrcr_gen import GenerateConfig, OfflineWriter, bin_by_upper, generate_dataset

    from .units import FewSharedKeysWriter

    def files(root):
        return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file() and p.name != "README.md"}

    def config(out):
        return GenerateConfig(needles=(2, 4), bins=(bin_by_upper(65536),), samples=4, rows_per_file=3, out=out)

    alone = config(tmp_path / "alone")
    generate_dataset(alone, OfflineWriter(0), engine=LocalEngine(1))
    shared_dirs = []
    import mrcr_gen.generate._pipeline as pipeline_module
    import mrcr_gen.generate._share as share_module

    share = share_module.share_writings
    monkeypatch.setattr(share_module, "PAIR_TOKENS", 1)  # any job is large enough to share
    monkeypatch.setattr(pipeline_module, "share_writings", lambda *a: shared_dirs.append(share(*a)) or shared_dirs[-1])
    shared = config(tmp_path / "shared")
    generate_dataset(shared, FewSharedKeysWriter(0), engine=LocalEngine(2))
    assert shared_dirs and shared_dirs[0] is not None and not shared_dirs[0].exists()  # used, then removed
    assert files(shared.out) == files(alone.out)


def test_a_shared_writings_part_cut_short_is_composed_again(tmp_path, monkeypatch) -> None:
    """The shared writings' parts are scratch, not fsynced: one an earlier run left cut short (a
    crash of the machine) is composed again, and a writer attached to it composes what it lacks."""
    from types import SimpleNamespace

    import mrcr_gen.generate._share as share_module
    from mrcr_gen._parquet import read_arrow_rows

    from .units import FewSharedKeysWriter

    monkeypatch.setattr(share_module, "PAIR_TOKENS", 1)  # any job is large enough to share
    monkeypatch.setattr(share_module, "SHARED_PART_KEYS", 1000)
    writer = FewSharedKeysWriter(0)
    rows = [(SimpleNamespace(max_tokens=65536),) * 4]  # what share_writings reads of a row spec
    with LocalEngine(2) as engine:
        store = share_module.share_writings(writer, rows, engine, tmp_path)
        # 1000 keys, then the last 2000 (the 2 workers' worth) in 8 parts of 250 (see shared_parts).
        starts = [0, 1000, *range(1250, 3000, 250)]
        assert store is not None and sorted(p.name for p in store.iterdir()) == sorted(f"{s}.arrow" for s in starts)
        part = store / "1000.arrow"
        whole = part.read_bytes()
        part.write_bytes(whole[: len(whole) // 2])
        assert read_arrow_rows(part) is None
        reader = FewSharedKeysWriter(0)
        reader.attach(store)  # what a worker of the rerun does if it reads the part before it is redone
        keys = reader.shared_keys()[990:1010]
        assert reader.writings(keys) == FewSharedKeysWriter(0).writings(keys)
        assert share_module.share_writings(writer, rows, engine, tmp_path) == store
    assert part.read_bytes() == whole and read_arrow_rows(store / "0.arrow") == 1000


def test_a_worker_takes_the_shared_parts_its_process_composed_from_memory(tmp_path) -> None:
    """A worker's writer takes the shared parts that its own process composed as they are, not
    decoded again from their files: here the file of such a part is cut short, and its writings are
    still neither composed again nor missing; a part another process composed is read from its
    file. The memory is handed over once: a second writer attached to the store reads the files."""
    from .units import FewSharedKeysWriter

    store, elsewhere = tmp_path / "store", tmp_path / "elsewhere"
    store.mkdir()
    elsewhere.mkdir()
    FewSharedKeysWriter(0).compose_part(1000, 2000, elsewhere)
    (store / "1000.arrow").write_bytes((elsewhere / "1000.arrow").read_bytes())  # "another process"
    FewSharedKeysWriter(0).compose_part(0, 1000, store)
    part = store / "0.arrow"
    part.write_bytes(part.read_bytes()[:100])
    keys = FewSharedKeysWriter(0).shared_keys()[:2000]
    expected = FewSharedKeysWriter(0).writings(keys)
    for composes_again in (0, 1000):
        reader, composed = FewSharedKeysWriter(0), []
        reader.compose = lambda ask, variant, reader=reader, composed=composed: (  # type: ignore[method-assign]
            composed.append(ask) or FewSharedKeysWriter.compose(reader, ask, variant)
        )
        reader.attach(store)
        assert reader.writings(keys) == expected
        assert len(composed) == composes_again


def test_a_generation_worker_killed_once_leaves_the_output_identical(tmp_path) -> None:
    import hashlib

    from mrcr_gen import GenerateConfig, OfflineWriter, bin_by_upper, generate_dataset

    from .units import DyingOnceWriter

    def files(root):
        return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}

    def config(out):
        return GenerateConfig(needles=(2, 4), bins=(bin_by_upper(16384),), samples=5, seed=3, out=out, rows_per_file=3)

    alone = config(tmp_path / "alone")
    generate_dataset(alone, OfflineWriter(3), engine=LocalEngine(1))
    (tmp_path / "markers").mkdir()
    killed = config(tmp_path / "killed")
    generate_dataset(killed, DyingOnceWriter(3, str(tmp_path / "markers")), engine=LocalEngine(2))
    assert (tmp_path / "markers" / "died").exists()  # a worker did die, and its unit ran again
    assert files(killed.out) == files(alone.out)
