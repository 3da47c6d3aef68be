from __future__ import annotations

import itertools
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from mrcr_gen import (
    MRCR_SCHEMA,
    GenerateConfig,
    OfflineWriter,
    bin_by_upper,
    bin_for_tokens,
    generate_dataset,
    generate_sample,
    iter_rows,
    validate_paths,
    write_rows,
)
from mrcr_gen._card import sidecar_path
from mrcr_gen.engines import LocalEngine
from mrcr_gen.recipes.openai_mrcr._assembler import tokens_window
from mrcr_gen.recipes.openai_mrcr._config import TOKENS_RANGE
from mrcr_gen.recipes.openai_mrcr._generate import FileFailed

from ..engines.units import cut_files_into_chunks, one_row_groups
from .structure import assert_mrcr_structure


def config(out: Path, **overrides) -> GenerateConfig:
    settings = dict(needles=(2, 4), samples=3, seed=5, out=out, rows_per_file=4)
    if "tokens" not in overrides:
        settings["bins"] = (bin_by_upper(8192), bin_by_upper(16384))
    return GenerateConfig(**(settings | overrides))


def run(cfg: GenerateConfig):
    return generate_dataset(cfg, OfflineWriter(cfg.seed), command="test")


def file_bytes(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file() and p.name != "README.md" and not p.name.startswith("README.")}


def test_layout_schema_and_sidecars(tmp_path):
    result = run(config(tmp_path))
    names = sorted(str(p.relative_to(tmp_path)) for p in result.files)
    assert names == ["2needle/2needle_0.parquet", "2needle/2needle_1.parquet", "4needle/4needle_0.parquet", "4needle/4needle_1.parquet"]
    for path in result.files:
        table = pq.read_table(path)
        assert table.schema.equals(MRCR_SCHEMA, check_metadata=False)
        assert pq.ParquetFile(path).metadata.row_group(0).column(0).compression == "ZSTD"
        meta = [json.loads(line) for line in sidecar_path(path).read_text().splitlines()]
        rows = list(iter_rows(path))
        assert len(meta) == len(rows)
        for row, record in zip(rows, meta):
            assert_mrcr_structure(row)
            assert tuple(record["needle_indices"])[record["target_ordinal"] - 1] == row.desired_msg_index
    card = (tmp_path / "README.md").read_text()
    for fact in ("seed | 5", "o200k_base", "sha256", '"name": "offline"', "| 2 | [4096, 8192] | 3 |"):
        assert fact in card


def test_same_command_and_seed_give_byte_identical_files(tmp_path):
    run(config(tmp_path / "a"))
    run(config(tmp_path / "b"))
    assert file_bytes(tmp_path / "a") == file_bytes(tmp_path / "b")
    run(config(tmp_path / "c", seed=6))
    assert file_bytes(tmp_path / "a") != file_bytes(tmp_path / "c")


def test_shards_are_disjoint_and_together_equal_the_whole(tmp_path):
    run(config(tmp_path / "whole"))
    merged: dict[str, bytes] = {}
    for k in (1, 2, 3):
        part = file_bytes_after(run, config(tmp_path / f"s{k}", shard=(k, 3)))
        assert not set(part) & set(merged)
        merged |= part
    assert merged == file_bytes(tmp_path / "whole")


def file_bytes_after(runner, cfg):
    runner(cfg)
    return file_bytes(cfg.out)


def test_interrupted_run_leaves_no_partial_parquet(tmp_path):
    cfg = config(tmp_path)

    reports = []

    def interrupt(rows):  # the second file's rows are composed: it is being written
        reports.append(rows)
        if len(reports) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        generate_dataset(cfg, OfflineWriter(cfg.seed), engine=LocalEngine(1), on_rows=interrupt)
    files = sorted(p.name for p in tmp_path.rglob("*") if p.is_file())
    assert files == ["2needle_0.parquet", "2needle_0.samples.jsonl", "README.md"]  # the card: being generated


def test_progress_moves_as_rows_are_composed_not_only_when_a_file_ends(tmp_path, monkeypatch):
    cfg = config(tmp_path / "one", needles=(2,), bins=(bin_by_upper(8192),), samples=3)
    one_row_groups(monkeypatch)  # a row group, so a report, per row
    shown = []
    generate_dataset(cfg, OfflineWriter(cfg.seed), engine=LocalEngine(1), on_rows=shown.append)
    assert shown == [1, 1, 1]  # one file, one unit: three reports, nothing added when it ends
    monkeypatch.undo()
    cfg = config(tmp_path / "two")
    shown.clear()
    generate_dataset(cfg, OfflineWriter(cfg.seed), engine=LocalEngine(2), on_rows=shown.append)
    assert sum(shown) == 12 and min(shown) > 0


def test_an_interrupted_pool_stops_its_workers_at_once_and_leaves_no_partial_file(tmp_path, monkeypatch):
    import mrcr_gen.recipes.openai_mrcr._generate as generate_module

    import mrcr_gen.generate._share as share_module

    monkeypatch.setattr(share_module, "SHARE_WHEN", float("inf"))  # straight to the files
    cfg = config(tmp_path / "out", needles=(8,), bins=(bin_by_upper(262144),), samples=256, rows_per_file=128)
    reported = []

    def interrupt(rows):  # a row group (about 64 rows here) of one file is composed
        reported.append(rows)
        raise KeyboardInterrupt

    with LocalEngine(2) as engine:
        with pytest.raises(KeyboardInterrupt):
            generate_dataset(cfg, OfflineWriter(cfg.seed), engine=engine, on_rows=interrupt)
        assert engine._pool is None  # its workers were ended by the interruption, not left to finish
    assert len(reported) == 1 and reported[0] < 128
    assert [p.name for p in cfg.out.rglob("*") if p.is_file()] == ["README.md"]  # neither file, nor a partial one
    rerun = []
    generate_dataset(cfg, OfflineWriter(cfg.seed), engine=LocalEngine(2), on_rows=rerun.append)
    assert sum(rerun) == 256 and len(list(cfg.out.rglob("*.parquet"))) == 2


def test_row_parquet_row_round_trip(tmp_path):
    rows = [r for path in run(config(tmp_path / "gen")).files for r in iter_rows(path)]
    write_rows(rows, tmp_path / "copy.parquet")
    assert list(iter_rows(tmp_path / "copy.parquet")) == rows


def test_tokens_mode_plans_one_target(tmp_path):
    cfg = config(tmp_path, tokens=20000, needles=(3,))
    result = run(cfg)
    assert len(result.samples) == 3
    assert all(19800 <= s["n_tokens"] <= 20000 for s in result.samples)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (dict(tokens=5000, bins=(bin_by_upper(8192),)), "give tokens or bins, not both"),
        (dict(tokens=4159), "4159 gives rows of 4095..4159 tokens"),
        (dict(tokens=1048577), "choose 4160..1048576"),
        (dict(date_added="02-29-2025"), "not a calendar date"),
        (dict(date_added="4-12-2025"), "not a calendar date"),
    ],
)
def test_config_refuses_what_the_validator_would_reject(tmp_path, overrides, message):
    with pytest.raises(ValidationError, match=message):
        GenerateConfig(out=tmp_path, **overrides)


def test_the_tokens_range_is_exactly_the_targets_whose_rows_stay_in_the_bins(tmp_path):
    low, high = TOKENS_RANGE
    for tokens in (low, low + 1, 6399, 6400, high):
        lowest, highest = tokens_window(tokens)
        assert bin_for_tokens(lowest) is not None and bin_for_tokens(highest) is not None
        GenerateConfig(out=tmp_path, tokens=tokens)
    assert bin_for_tokens(tokens_window(low - 1)[0]) is None
    assert GenerateConfig(out=tmp_path, date_added="02-29-2024").date_added == "02-29-2024"


def test_rows_of_the_smallest_tokens_target_validate_clean(tmp_path):
    result = run(config(tmp_path, tokens=TOKENS_RANGE[0], needles=(2,)))
    assert all(4096 <= s["n_tokens"] <= TOKENS_RANGE[0] for s in result.samples)
    assert validate_paths(result.files, workers=1).exit_code == 0


def test_a_rerun_keeps_finished_files_and_writes_only_what_is_missing(tmp_path):
    cfg = config(tmp_path / "out")
    run(cfg)
    before = file_bytes(cfg.out)
    (cfg.out / "4needle" / "4needle_1.parquet").unlink()
    (cfg.out / "2needle" / "2needle_0.samples.jsonl").write_text("truncated\n")
    generated, reused = [], []
    result = generate_dataset(cfg, OfflineWriter(cfg.seed), on_rows=generated.append, on_reused=reused.append)
    assert sorted(generated) == [2, 4] and reused == [2, 4]  # progress comes as workers finish rows
    assert file_bytes(cfg.out) == before
    assert len(result.samples) == 12


def test_a_different_writer_or_date_is_never_reused(tmp_path):
    cfg = config(tmp_path / "out")
    run(cfg)
    generated = []
    generate_dataset(cfg, OfflineWriter(cfg.seed + 1), on_rows=generated.append, overwrite=True)
    assert sum(generated) == 12
    generated.clear()
    later = cfg.model_copy(update={"date_added": "01-01-2027"})
    generate_dataset(later, OfflineWriter(cfg.seed + 1), on_rows=generated.append, overwrite=True)
    assert sum(generated) == 12


def test_a_folder_holds_one_generation_another_is_refused_unless_overwrite(tmp_path):
    """Issue 19 item 9: --rows-per-file 1 then 5 into one folder left files 1-4 of the first layout."""
    from mrcr_gen._card import FolderTaken

    first = config(tmp_path, needles=(2,), bins=(bin_by_upper(8192),), samples=5, rows_per_file=1)
    run(first)
    assert len(list(tmp_path.rglob("*.parquet"))) == 5
    second = first.model_copy(update={"rows_per_file": 5})
    with pytest.raises(FolderTaken, match=r"README\.md: --rows-per-file 1 there, 5 here\); add --overwrite"):
        run(second)
    assert len(list(tmp_path.rglob("*.parquet"))) == 5  # refused before touching anything
    (tmp_path / "notes.txt").write_text("mine")  # a file no card lists stays
    generate_dataset(second, OfflineWriter(second.seed), overwrite=True)
    files = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert files == ["2needle/2needle_0.parquet", "2needle/2needle_0.samples.jsonl", "README.md", "notes.txt"]
    assert validate_paths([tmp_path], workers=1).summary.rows == 5
    generated = []
    generate_dataset(second, OfflineWriter(second.seed), on_rows=generated.append)  # the same again: resumes
    assert generated == []


def test_shards_of_one_generation_share_a_folder_and_an_interrupted_run_is_known(tmp_path, monkeypatch):
    import mrcr_gen.generate._pipeline as gen
    from mrcr_gen._card import FolderTaken

    for k in (1, 2):
        run(config(tmp_path, shard=(k, 2)))
    assert sorted(p.name for p in tmp_path.glob("README*")) == ["README.shard-1-of-2.md", "README.shard-2-of-2.md"]
    monkeypatch.setattr(gen, "write_chunk", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt))
    other = tmp_path / "other"
    with pytest.raises(KeyboardInterrupt):
        generate_dataset(config(other), OfflineWriter(5), engine=LocalEngine(1))
    monkeypatch.undo()
    with pytest.raises(FolderTaken, match="--seed 5 there, 6 here"):
        run(config(other, seed=6))


def test_non_ascii_text_survives_the_parquet_round_trip(tmp_path):
    row = generate_sample(2, 8192, seed=3).row
    fancy = row.model_copy(update={"answer": row.random_string_to_prepend + "Über 🎉 “quotes” — 你好", "date_added": "04-12-2025"})
    write_rows([fancy, row], tmp_path / "x.parquet")
    assert list(iter_rows(tmp_path / "x.parquet")) == [fancy, row]


def test_a_crash_between_parquet_and_sidecar_never_reuses_the_old_sidecar(tmp_path, monkeypatch):
    import mrcr_gen.recipes.openai_mrcr._generate as generate_module

    cfg = config(tmp_path / "out", needles=(2,), bins=(bin_by_upper(8192),), rows_per_file=3)
    run(cfg)
    import mrcr_gen.generate._units as units_module

    real = units_module.write_text_atomic

    def crash_before_the_sidecar(path, text):
        if str(path).endswith(".samples.jsonl"):
            raise KeyboardInterrupt
        real(path, text)

    # Another generation (another writer, --overwrite) replaces the parquet, then dies before
    # writing its sidecar; the same command run again must make that file again, not keep it
    # beside a sidecar of other rows.
    monkeypatch.setattr(units_module, "write_text_atomic", crash_before_the_sidecar)
    with pytest.raises(KeyboardInterrupt):
        generate_dataset(cfg, OfflineWriter(cfg.seed + 1), engine=LocalEngine(1), overwrite=True)
    monkeypatch.undo()
    generated = []
    generate_dataset(cfg, OfflineWriter(cfg.seed + 1), on_rows=generated.append)
    assert sum(generated) == 3
    fresh = config(tmp_path / "fresh", needles=(2,), bins=(bin_by_upper(8192),), rows_per_file=3)
    generate_dataset(fresh, OfflineWriter(cfg.seed + 1))
    assert file_bytes(cfg.out) == file_bytes(fresh.out)


def test_a_repeated_bin_plans_its_rows_once_and_no_bin_is_an_error(tmp_path):
    cfg = config(tmp_path, needles=(2,), bins=(bin_by_upper(8192), bin_by_upper(8192)), samples=2)
    assert sum(len(f.rows) for f in cfg.plan()) == 2
    with pytest.raises(ValueError, match="at least one bin"):
        config(tmp_path, bins=())


def test_chunks_workers_and_row_groups_never_change_the_bytes(tmp_path, monkeypatch):
    import mrcr_gen.generate._chunks as chunks_module
    from mrcr_gen.engines import LocalEngine

    one_row_groups(monkeypatch)  # then chunks of a row end where groups end: the bytes never change
    whole = config(tmp_path / "whole")
    generate_dataset(whole, OfflineWriter(whole.seed), engine=LocalEngine(1))
    joined = cut_files_into_chunks(monkeypatch)  # a row per chunk: parts, then a join
    for workers in (1, 2):
        chunked = config(tmp_path / f"chunked{workers}")
        generate_dataset(chunked, OfflineWriter(chunked.seed), engine=LocalEngine(workers))
        assert file_bytes(chunked.out) == file_bytes(whole.out)
        assert not list(chunked.out.rglob("*.parts"))
        assert sorted(joined) == sorted(p.name for p in chunked.out.rglob("*.parquet"))
        joined.clear()
    monkeypatch.setattr(chunks_module, "GROUP_BYTES", 3 * 5 * 8192)  # three rows of the 8k bin a group
    groups = config(tmp_path / "groups")
    generate_dataset(groups, OfflineWriter(groups.seed), engine=LocalEngine(1))
    for path in groups.out.rglob("*.parquet"):
        meta = pq.ParquetFile(path).metadata
        sizes = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
        assert len(sizes) > 1 and all(size <= 3 for size in sizes)
        assert pq.read_table(path).equals(pq.read_table(whole.out / path.relative_to(groups.out)))


def whole_then_chunked(tmp_path, monkeypatch) -> tuple[GenerateConfig, GenerateConfig]:
    """A file of 4 rows generated whole (the reference), then generation cut into chunks of a row,
    each its own row group (so a file joined from them has the reference's bytes); the configs of
    the reference and of the run to cut."""
    from mrcr_gen.engines import LocalEngine

    one_row_groups(monkeypatch)
    whole = config(tmp_path / "whole", needles=(2,), bins=(bin_by_upper(8192),), samples=4)
    generate_dataset(whole, OfflineWriter(whole.seed), engine=LocalEngine(1))
    cut_files_into_chunks(monkeypatch)  # a row per chunk: the file is joined
    return whole, config(tmp_path / "out", needles=(2,), bins=(bin_by_upper(8192),), samples=4)


def test_finished_chunks_of_an_interrupted_large_file_are_kept(tmp_path, monkeypatch):
    from mrcr_gen.engines import LocalEngine

    whole, cfg = whole_then_chunked(tmp_path, monkeypatch)
    done = []

    def interrupt(rows):  # the third chunk's row is composed: two chunks are written
        done.append(rows)
        if len(done) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        generate_dataset(cfg, OfflineWriter(cfg.seed), engine=LocalEngine(1), on_rows=interrupt)
    assert not list(cfg.out.rglob("*.parquet")) and len(list(cfg.out.rglob("*.parts/*.jsonl"))) == 2
    assert not list(cfg.out.rglob("*.partial"))  # the file being joined was dropped, not left half-written
    again = []
    generate_dataset(cfg, OfflineWriter(cfg.seed), engine=LocalEngine(1), on_rows=again.append)
    assert sum(again) == 4 and file_bytes(cfg.out) == file_bytes(whole.out)


def test_a_part_cut_short_by_a_crash_is_written_again_not_joined(tmp_path, monkeypatch):
    """Parts are scratch, not fsynced: after a crash of the machine one may be cut short (or its
    marker hold fewer lines); a rerun writes it again instead of joining it."""
    from mrcr_gen.engines import LocalEngine

    whole, cfg = whole_then_chunked(tmp_path, monkeypatch)
    done = []

    def interrupt(rows):
        done.append(rows)
        if len(done) == 4:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        generate_dataset(cfg, OfflineWriter(cfg.seed), engine=LocalEngine(1), on_rows=interrupt)
    [parts] = cfg.out.rglob("*.parts")
    cut = parts / "1.part"
    cut.write_bytes(cut.read_bytes()[: cut.stat().st_size // 2])  # the data never reached the disk
    (parts / "2.jsonl").write_text("", encoding="utf-8")  # a marker whose line was lost
    generate_dataset(cfg, OfflineWriter(cfg.seed), engine=LocalEngine(1))
    assert file_bytes(cfg.out) == file_bytes(whole.out)


def test_a_chunk_whose_worker_died_fails_its_file_cleanly_and_a_rerun_completes_it(tmp_path, monkeypatch):
    import mrcr_gen.generate._pipeline as pipeline_module
    from mrcr_gen.engines import LocalEngine

    from ..engines.units import write_chunk_dying_on_2needle_chunk_1

    whole, cfg = whole_then_chunked(tmp_path, monkeypatch)
    with monkeypatch.context() as patched:
        patched.setattr(pipeline_module, "write_chunk", write_chunk_dying_on_2needle_chunk_1)
        with LocalEngine(2) as engine, pytest.raises(FileFailed, match="2needle_0.parquet") as failed:
            generate_dataset(cfg, OfflineWriter(cfg.seed), engine=engine)
    assert [Path(path).name for path, _ in failed.value.failures] == ["2needle_0.parquet"]
    assert not list(cfg.out.rglob("*.parquet")) and not list(cfg.out.rglob("*.partial"))
    generate_dataset(cfg, OfflineWriter(cfg.seed), engine=LocalEngine(1))
    assert file_bytes(cfg.out) == file_bytes(whole.out)


def rows_in_bin(n: int, upper: int = 1048576) -> tuple:
    from mrcr_gen.recipes.openai_mrcr._generate import RowSpec

    return tuple(RowSpec(n_needles=8, bin=bin_by_upper(upper), tokens=None, index=i, seed=0) for i in range(n))


def test_files_are_whole_units_unless_they_would_end_after_the_even_spread():
    from mrcr_gen.generate import UNIT_BYTES, plan_chunks

    eight_files = [rows_in_bin(100) for _ in range(8)]
    assert plan_chunks(eight_files, workers=2) == [[f] for f in eight_files]  # 4 files per worker: whole
    assert plan_chunks(eight_files, workers=1) == [[f] for f in eight_files]
    *whole, last = plan_chunks(eight_files[:7], workers=2)  # 3 each, then the 7th would end alone
    assert whole == [[f] for f in eight_files[:6]] and len(last) > 2 and sum(last, ()) == eight_files[6]
    [one_file] = plan_chunks([rows_in_bin(100)], workers=2)  # one file for two workers: chunks
    assert len(one_file) > 2 and sum(one_file, ()) == rows_in_bin(100)
    assert plan_chunks([rows_in_bin(100)], workers=1) == [[rows_in_bin(100)]]
    small, large = plan_chunks([rows_in_bin(100, 8192), rows_in_bin(100)], workers=2)
    assert small == [rows_in_bin(100, 8192)] and len(large) > 1  # the small file is a unit, the large one is cut
    assert all(len(chunk) == 1 or 5 * 1048576 * len(chunk) <= UNIT_BYTES for chunk in large)


def list_schedule(units: list[int], workers: int) -> int:
    """When the last of `units` (costs, in order) ends on `workers` that each take the next one when free."""
    import heapq

    free_at = [0] * workers
    for cost in units:
        heapq.heapreplace(free_at, free_at[0] + cost)
    return max(free_at)


def test_a_file_cut_by_the_planner_has_the_bytes_of_the_same_file_written_whole(tmp_path):
    """No patched planner: the rows of the 256k bin make several row groups, which two workers
    build as chunks (each its groups, compressed) that are joined byte for byte."""
    from mrcr_gen.engines import LocalEngine
    from mrcr_gen.generate import row_groups

    runs = {}
    for workers in (1, 2):
        cfg = config(tmp_path / f"w{workers}", needles=(2,), bins=(bin_by_upper(262144),), samples=14, rows_per_file=14)
        generate_dataset(cfg, OfflineWriter(cfg.seed), engine=LocalEngine(workers))
        runs[workers] = file_bytes(cfg.out)
    [path] = (tmp_path / "w2").rglob("*.parquet")
    meta = pq.ParquetFile(path).metadata
    planned = [len(group) for group in row_groups(rows_in_bin(14, 262144))]
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == planned and len(planned) > 2
    assert runs[2] == runs[1]


@given(
    sizes=st.lists(st.integers(1, 30), min_size=1, max_size=12),
    uppers=st.lists(st.sampled_from([8192, 131072, 1048576]), min_size=12, max_size=12),
    workers=st.integers(1, 16),
)
def test_chunks_keep_every_row_in_order_and_the_workers_end_together(sizes, uppers, workers):
    from unittest import mock

    import mrcr_gen.generate._chunks as generate_module
    from mrcr_gen.generate._chunks import GROUP_BYTES, MIN_UNIT_BYTES, UNITS_PER_WORKER, _row_bytes, plan_chunks, row_groups

    unit_bytes = 16 << 20  # chunks much smaller than files, as in a real job of large files
    files = [rows_in_bin(size, upper) for size, upper in zip(sizes, uppers)]
    planned = sum(_row_bytes(spec) for rows in files for spec in rows)
    chunk_bytes = min(unit_bytes, max(MIN_UNIT_BYTES, planned // (UNITS_PER_WORKER * workers)))
    with mock.patch.object(generate_module, "UNIT_BYTES", unit_bytes):
        plan = plan_chunks(files, workers)
    units = []
    for rows, chunks in zip(files, plan, strict=True):
        assert sum(chunks, ()) == rows
        # Chunks end where the file's row groups end: a file joined from them has its own bytes.
        groups = row_groups(rows)
        group_ends = set(itertools.accumulate(map(len, groups)))
        assert set(itertools.accumulate(map(len, chunks))) <= group_ends
        if len(chunks) > 1:
            assert all(c in groups or sum(map(_row_bytes, c)) <= chunk_bytes for c in chunks)
        units += [sum(map(_row_bytes, c)) for c in chunks]
    # Whole files end by the even spread's end; after it, at most one chunk (or one group) runs on.
    assert list_schedule(units, workers) <= planned / workers + max(chunk_bytes, GROUP_BYTES + 5 * 1048576)
