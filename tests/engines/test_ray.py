"""On one local Ray cluster: generation byte-identical to the local engine, validation findings
identical, a worker killed on purpose retried with the output still identical."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from mrcr_gen import GenerateConfig, OfflineWriter, bin_by_upper, generate_dataset, validate_paths
from mrcr_gen.engines import LocalEngine, TaskFailed
from mrcr_gen.recipes.openai_mrcr._validate import repair
from tests.support.rowkit import MUTATIONS, make_row, write_rows

from .units import DyingOnceWriter, cut_files_into_chunks, die_once, one_row_groups, square

pytestmark = pytest.mark.usefixtures("ray_cluster")


def digests(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != "README.md"
    }


def ray_engine(**options):
    from mrcr_gen.engines import RayEngine

    return RayEngine(**options)


def config(out: Path) -> GenerateConfig:
    return GenerateConfig(needles=(2, 4), bins=(bin_by_upper(16384),), samples=5, seed=3, out=out, rows_per_file=3)


def test_ray_engine_keeps_unit_order_and_retries_a_killed_worker(tmp_path: Path) -> None:
    engine = ray_engine()
    assert engine.workers == 2
    assert list(engine.map(square, [(i,) for i in range(10)], window=2)) == [i * i for i in range(10)]
    assert list(engine.map(die_once, [(i, str(tmp_path)) for i in range(3)])) == [0, 1, 4]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["died-0", "died-1", "died-2"]  # each died once
    no_retries = ray_engine(max_retries=0)
    (tmp_path / "again").mkdir()
    [outcome] = list(no_retries.map(die_once, [(7, str(tmp_path / "again"))]))
    assert isinstance(outcome, TaskFailed) and outcome.index == 0


def test_generation_on_ray_is_byte_identical_to_local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    local, on_ray = config(tmp_path / "local"), config(tmp_path / "ray")
    one_row_groups(monkeypatch)  # the chunks of a row that the Ray run is cut into end where groups end
    generate_dataset(local, OfflineWriter(3), engine=LocalEngine(2), command="mrcr-gen local")
    cut_files_into_chunks(monkeypatch)  # chunk tasks, then a join task per file
    generate_dataset(on_ray, OfflineWriter(3), engine=ray_engine(), command="mrcr-gen ray")
    assert digests(local.out) == digests(on_ray.out) and len(digests(local.out)) == 8
    card_local = (local.out / "README.md").read_text().splitlines()
    card_ray = (on_ray.out / "README.md").read_text().splitlines()
    assert [(a, b) for a, b in zip(card_local, card_ray) if a != b] == [
        ("| command | `mrcr-gen local` |", "| command | `mrcr-gen ray` |")
    ]
    assert not list(on_ray.out.rglob("*.parts"))  # chunks joined and cleaned up


def test_a_killed_generation_task_is_retried_and_the_output_identical(tmp_path: Path) -> None:
    local = config(tmp_path / "local")
    generate_dataset(local, OfflineWriter(3), engine=LocalEngine(1))
    markers = tmp_path / "markers"
    markers.mkdir()
    on_ray = config(tmp_path / "ray")
    generate_dataset(on_ray, DyingOnceWriter(3, str(markers)), engine=ray_engine())
    assert (markers / "died").exists()  # a task did die, and was run again
    assert digests(local.out) == digests(on_ray.out)


def test_validation_findings_on_ray_equal_local(tmp_path: Path) -> None:
    rows = [make_row(s, filler=300) for s in range(9)]
    rows[1] = MUTATIONS["answer_other_needle"][0](rows[1])
    rows[4] = MUTATIONS["extra_needle"][0](rows[4])
    rows[7] = MUTATIONS["near_duplicate"][0](rows[7])
    path = write_rows(tmp_path / "bad.parquet", rows, row_group_size=2)
    local = validate_paths([path], workers=1)
    on_ray = validate_paths([path], engine=ray_engine())
    assert on_ray == local and local.exit_code == 1
    assert on_ray.to_json() == local.to_json()
    assert [f.row for f in on_ray.findings] == [1, 4, 7]
    fixed_local = repair([path], tmp_path / "local.parquet", mode="fix", workers=1)
    fixed_ray = repair([path], tmp_path / "ray.parquet", mode="fix", engine=ray_engine())
    assert (fixed_local.kept, fixed_local.fixed, fixed_local.dropped) == (
        fixed_ray.kept,
        fixed_ray.fixed,
        fixed_ray.dropped,
    )
    assert (tmp_path / "local.parquet").read_bytes() == (tmp_path / "ray.parquet").read_bytes()


def test_the_commands_with_engine_ray(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from mrcr_gen.cli import gen_main
    from mrcr_gen.cli._validate import validate_main

    def run(main, *args: str) -> int:
        with pytest.raises(SystemExit) as exit_info:
            main(list(args))
        return exit_info.value.code

    common = ["--needles", "2", "--bin", "8192", "--samples", "3", "--rows-per-file", "2"]
    assert run(gen_main, *common, "--out", str(tmp_path / "local"), "--workers", "1") == 0
    assert run(gen_main, *common, "--out", str(tmp_path / "ray"), "--engine", "ray") == 0
    assert digests(tmp_path / "local") == digests(tmp_path / "ray")
    capsys.readouterr()
    assert run(validate_main, str(tmp_path / "ray"), "--engine", "ray", "--json", "-") == 0
    on_ray = capsys.readouterr().out
    assert run(validate_main, str(tmp_path / "ray"), "--workers", "1", "--json", "-") == 0
    assert capsys.readouterr().out == on_ray
    assert (
        run(gen_main, *common, "--out", str(tmp_path / "x"), "--address", "1.2.3.4:1") == 2
    )  # --address needs --engine ray
