"""PoolWriter: rows generated from a pool keep every generator guarantee; small pools fail clearly."""

from __future__ import annotations

import json

import pytest

from mrcr_gen import Ask, Assembler, AssemblyError, GenerateConfig, OfflineWriter, bin_by_upper, generate_dataset
from mrcr_gen.cli import gen_main
from mrcr_gen.pool import PoolError, PoolTooSmall, PoolWriter, PoolWriting, read_pool, write_pool
from mrcr_gen.recipes.openai_mrcr._harvest import harvest
from mrcr_gen.recipes.openai_mrcr._shortcut import check_pool
from tests.support import REAL_ROWS

from .pool_checks import check_dataset


@pytest.fixture(scope="module")
def harvested(tmp_path_factory):
    """A pool harvested from generated files (offline writings: 8 distinct per needle ask)."""
    tmp = tmp_path_factory.mktemp("harvested")
    config = GenerateConfig(needles=(8,), bins=(bin_by_upper(16384),), samples=3, out=tmp / "src")
    files = generate_dataset(config, OfflineWriter(1)).files
    harvest(files, tmp / "pool.parquet")
    return tmp / "pool.parquet"


def run_cli(args, capsys):
    with pytest.raises(SystemExit) as exit_info:
        gen_main([str(a) for a in args])
    captured = capsys.readouterr()
    return exit_info.value.code, captured.out, captured.err


def test_generate_from_harvested_pool(harvested, tmp_path, capsys):
    out = tmp_path / "ds"
    code, _, err = run_cli(
        ["--writer", "pool", "--pool", harvested, "--bin", 8192, "--needles", 2, "--needles", 8, "--samples", 3, "--out", out],
        capsys,
    )
    assert code == 0, err
    assert check_dataset(out) == 6
    card = (out / "README.md").read_text()
    writer = json.loads(card.split("| writer | `")[1].split("` |")[0])
    assert writer["name"] == "pool" and writer["path"] == str(harvested) and len(writer["sha256"]) == 64
    # the same command and pool give byte-identical files
    code, _, _ = run_cli(
        ["--writer", "pool", "--pool", harvested, "--bin", 8192, "--needles", 2, "--needles", 8, "--samples", 3, "--out", tmp_path / "ds2"],
        capsys,
    )
    assert code == 0
    for path in out.rglob("*.parquet"):
        assert path.read_bytes() == (tmp_path / "ds2" / path.relative_to(out)).read_bytes()


def test_rows_only_use_pool_writings(harvested, tmp_path):
    pool = read_pool(harvested)
    texts = {(w.ask, w.text) for w in pool}
    writer = PoolWriter.from_file(harvested)
    config = GenerateConfig(needles=(4,), bins=(bin_by_upper(16384),), samples=2, out=tmp_path)
    generate_dataset(config, writer)
    import pyarrow.parquet as pq

    for path in tmp_path.rglob("*.parquet"):
        for record in pq.read_table(path).to_pylist():
            messages = json.loads(record["prompt"])[1:-1]
            pairs = {(messages[i]["content"], messages[i + 1]["content"]) for i in range(0, len(messages), 2)}
            assert pairs <= texts


def test_token_counts_come_from_the_pool(tmp_path):
    ask = Ask(format="poem", entity="cats")
    writings = [PoolWriting.make(ask, f"text {i}", 12345 + i, "test") for i in range(3)]
    writer = PoolWriter(writings)
    got = writer.writings([(ask, 0), (ask, 1), (ask, 2)])
    assert sorted((w.text, w.n_tokens) for w in got) == [("text 0", 12345), ("text 1", 12346), ("text 2", 12347)]
    assert writer.n_variants(ask) == 3 and writer.n_variants(Ask(format="poem", entity="dogs")) == 0
    # identical texts for one ask are one writing
    assert PoolWriter(writings + writings).n_variants(ask) == 3


@pytest.mark.skipif(not REAL_ROWS.exists(), reason="real openai/mrcr rows not available")
def test_generate_from_real_pool(tmp_path, capsys):
    pool = tmp_path / "real.parquet"
    harvest([REAL_ROWS], pool)
    out = tmp_path / "ds"
    code, _, err = run_cli(
        ["--writer", "pool", "--pool", pool, "--bin", 8192, "--bin", 32768, "--needles", 2, "--needles", 4, "--needles", 8,
         "--samples", 2, "--out", out],
        capsys,
    )
    assert code == 0, err
    assert check_dataset(out) == 12


def small_pool(tmp_path, per_ask):
    writings = []
    for i, (ask_text, count) in enumerate(per_ask.items()):
        fmt, entity = ask_text.split(" about ")
        ask = Ask(format=fmt, entity=entity)
        writings += [PoolWriting.make(ask, f"{ask_text} number {v} " + "word " * 50, 60, "test") for v in range(count)]
    return write_pool(writings, tmp_path / "small.parquet")


def test_too_few_writings_for_the_needles(tmp_path, capsys):
    pool = small_pool(tmp_path, {"poem about cats": 3, "song about dogs": 2, "email about rain": 1})
    code, out, err = run_cli(["--writer", "pool", "--pool", pool, "--bin", 8192, "--needles", 8, "--samples", 1, "--out", tmp_path / "o"], capsys)
    assert code == 2
    assert err.strip() == "mrcr-gen: error: pool has no ask with 8 distinct writings (most: 3 for 'write a poem about cats')"
    assert not (tmp_path / "o").exists()


def test_too_few_tokens_for_the_bin(tmp_path, capsys):
    pool = small_pool(tmp_path, {"poem about cats": 3, "song about dogs": 2, "email about rain": 1})
    code, _, err = run_cli(["--writer", "pool", "--pool", pool, "--bin", 8192, "--needles", 2, "--samples", 1, "--out", tmp_path / "o"], capsys)
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert "pool has 360 tokens of distinct writings (6 writings) but bin [4096, 8192] needs up to 8,192" in err
    assert not (tmp_path / "o").exists()


def test_preamble_and_distractor_requirements():
    only = Ask(format="poem", entity="cats")
    with pytest.raises(AssemblyError, match=r"pool has only one ask \('write a poem about cats'\)"):
        Assembler(PoolWriter([PoolWriting.make(only, f"t{i}", 5, "x") for i in range(4)]), "01-01-2025")._needle_candidates(2)
    other = Ask(format="song", entity="dogs")
    writer = PoolWriter([PoolWriting.make(only, f"t{i}", 5, "x") for i in range(4)] + [PoolWriting.make(other, "s", 5, "x")])
    with pytest.raises(PoolTooSmall, match="only 'write a poem about cats' with 2 distinct writings besides the needle ask"):
        check_pool(writer, [2], 10, "x")


def test_bad_pool_files(tmp_path, capsys):
    with pytest.raises(PoolError, match="does not exist"):
        PoolWriter.from_file(tmp_path / "missing.parquet")
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"ask": ["write a poem about cats"]}), tmp_path / "notpool.parquet")
    code, _, err = run_cli(["--writer", "pool", "--pool", tmp_path / "notpool.parquet", "--bin", 8192, "--samples", 1, "--out", tmp_path / "o"], capsys)
    assert code == 2 and "is not a pool: missing column(s) id, format, entity, text, n_tokens, source" in err


def test_an_invalid_pool_row_is_named_with_its_problem(tmp_path):
    good = PoolWriting.make(Ask(format="poem", entity="cats"), "a poem", 3, "x")
    write_pool([good], tmp_path / "pool.parquet")
    import pyarrow.parquet as pq

    table = pq.read_table(tmp_path / "pool.parquet")
    table = table.set_column(0, "id", [["0" * 16]])
    pq.write_table(table, tmp_path / "bad.parquet")
    with pytest.raises(PoolError, match=r"bad\.parquet row 0 is invalid: id 0{16} is not the hash of its ask and text$"):
        read_pool(tmp_path / "bad.parquet")
