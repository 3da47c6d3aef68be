"""`mrcr-gen pool harvest` on inputs it cannot harvest as they are (issue 24, item 4): files with no
rows, files of the wrong shape, and MRCR v2 files (harvested, their asks as a pool's). Every
refusal is one line on stderr, exit code 2, and leaves no pool and no catalog."""

from __future__ import annotations

import csv
import json
import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import mrcr_gen
from mrcr_gen import GenerateConfig, OfflineWriter, bin_by_upper, generate_dataset
from mrcr_gen.cli import gen_main
from mrcr_gen.pool import PoolError, read_pool
from mrcr_gen.pool._pool import quality_report_path
from mrcr_gen.recipes.mrcr_v2 import V2Config, V2OfflineWriter, generate_v2, v2_bucket
from mrcr_gen.recipes.mrcr_v2._rows import V2_COLUMNS
from mrcr_gen.recipes.mrcr_v2._text import ask_text
from mrcr_gen.recipes.openai_mrcr._harvest import catalog_path
from mrcr_gen.recipes.openai_mrcr._harvest import harvest as harvest_openai
from mrcr_gen.recipes.openai_mrcr._rows import MRCR_SCHEMA

from .pool_checks import check_dataset

FEWSHOT_END = "======== EXAMPLE 3 ========\n\n"
V2_TURN = re.compile(r"User: (Write a [^\n]*)\n\nAssistant: (.*?)\n\n(?=User: |\Z)", re.DOTALL)


def run_harvest(capsys, *args):
    with pytest.raises(SystemExit) as exit_info:
        gen_main(["pool", "harvest", *map(str, args)])
    captured = capsys.readouterr()
    return exit_info.value.code, captured.out, captured.err


def assert_refused(capsys, out, message, *inputs):
    """The command prints exactly `mrcr-gen: error: {message}` on stderr, nothing on stdout, exits
    with 2 and writes neither the pool nor its catalog."""
    code, stdout, stderr = run_harvest(capsys, *inputs, "--out", out)
    assert (code, stdout, stderr) == (2, "", f"mrcr-gen: error: {message}\n")
    assert not out.exists() and not catalog_path(out).exists()
    assert list(out.parent.glob(f"*{out.stem}*")) == []  # no temporary file left either


@pytest.fixture(scope="module")
def openai_file(tmp_path_factory):
    out = tmp_path_factory.mktemp("openai")
    config = GenerateConfig(needles=(2,), bins=(bin_by_upper(8192),), samples=2, out=out)
    return generate_dataset(config, OfflineWriter(0)).files[0]


@pytest.fixture(scope="module")
def v2_files(tmp_path_factory):
    """The same MRCR v2 rows as CSV and as parquet: 2 transcripts of 2 rows, (8192, 16384]."""
    out = tmp_path_factory.mktemp("v2")
    found = {}
    for fmt in ("csv", "parquet"):
        config = V2Config(needles=(4,), buckets=(v2_bucket(16384),), samples=4, rows_per_transcript=2, seed=3,
                          out=out / fmt, format=fmt)
        generate_v2(config, V2OfflineWriter(3))
        found[fmt] = next((out / fmt).rglob(f"*.{fmt}"))
    return found


@pytest.fixture
def empty_file(tmp_path):
    """A valid openai/mrcr parquet file with 0 rows."""
    path = tmp_path / "empty.parquet"
    pq.write_table(MRCR_SCHEMA.empty_table(), path)
    return path


# --- files with no rows ----------------------------------------------------------------------------


def test_a_file_with_no_rows_is_refused(empty_file, tmp_path, capsys):
    out = tmp_path / "pool.parquet"
    message = f"{empty_file} has no rows: the pool would be empty"
    with pytest.raises(PoolError) as error:
        mrcr_gen.harvest([empty_file], out)
    assert str(error.value) == message
    with pytest.raises(PoolError, match=re.escape(message)):
        harvest_openai([empty_file], out)
    assert_refused(capsys, out, message, empty_file)


def test_inputs_that_all_have_no_rows_are_refused_by_name(empty_file, tmp_path, capsys):
    other = tmp_path / "other.parquet"
    other.write_bytes(empty_file.read_bytes())
    message = f"none of the 2 inputs has rows ({empty_file} and {other}): the pool would be empty"
    with pytest.raises(PoolError) as error:
        mrcr_gen.harvest([empty_file, other], tmp_path / "pool.parquet")
    assert str(error.value) == message
    assert_refused(capsys, tmp_path / "pool.parquet", message, empty_file, other)


def test_a_refusal_leaves_an_existing_pool_alone(openai_file, empty_file, tmp_path, capsys):
    out = tmp_path / "pool.parquet"
    mrcr_gen.harvest([openai_file], out)
    before = out.read_bytes(), catalog_path(out).read_bytes()
    code, _, err = run_harvest(capsys, empty_file, "--out", out)
    assert code == 2 and err == f"mrcr-gen: error: {empty_file} has no rows: the pool would be empty\n"
    assert (out.read_bytes(), catalog_path(out).read_bytes()) == before


@pytest.mark.parametrize("which", ["pool", "catalog", "quality report"])
def test_a_file_we_did_not_write_at_the_pool_or_its_catalog_is_refused(openai_file, tmp_path, capsys, which):
    """Issue 33 item 4: a foreign file named like the pool (or its catalog or quality report, beside
    no pool of ours): one line naming it, exit 2, nothing written; a pool of ours is replaced by the
    next harvest."""
    out = tmp_path / "pool.parquet"
    foreign = {"pool": out, "catalog": catalog_path(out), "quality report": quality_report_path(out)}[which]
    foreign.write_bytes(b"not ours")
    code, stdout, err = run_harvest(capsys, openai_file, "--out", out)
    assert (code, stdout) == (2, "")
    assert err == (
        f"mrcr-gen: error: refusing to overwrite {foreign}: mrcr-gen did not write it; "
        "move it away or choose another --out\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == [foreign.name] and foreign.read_bytes() == b"not ours"
    foreign.unlink()
    mrcr_gen.harvest([openai_file], out)
    assert mrcr_gen.harvest([openai_file], out).writings == len(read_pool(out))  # ours: replaced


def test_an_empty_file_beside_others_is_harvested_as_nothing_with_a_warning(openai_file, empty_file, tmp_path, capsys):
    alone = mrcr_gen.harvest([openai_file], tmp_path / "alone.parquet")
    both = mrcr_gen.harvest([openai_file, empty_file], tmp_path / "both.parquet")
    assert both.empty_files == (str(empty_file),) and alone.empty_files == ()
    assert (both.rows, both.pairs, both.writings) == (alone.rows, alone.pairs, alone.writings)
    assert (tmp_path / "both.parquet").read_bytes() == (tmp_path / "alone.parquet").read_bytes()
    assert json.loads(catalog_path(tmp_path / "both.parquet").read_text())["empty_files"] == [str(empty_file)]
    assert "empty_files" not in json.loads(catalog_path(tmp_path / "alone.parquet").read_text())

    out = tmp_path / "cli.parquet"
    code, stdout, stderr = run_harvest(capsys, openai_file, empty_file, "--out", out)
    assert code == 0
    assert stderr.splitlines()[-1] == f"mrcr-gen: warning: no rows (nothing harvested) in {empty_file}"
    assert stdout.startswith(f"pool {out}: {alone.writings:,} distinct writings") and " of 2 file(s);" in stdout
    assert out.read_bytes() == (tmp_path / "alone.parquet").read_bytes()


def test_rows_without_a_single_parsable_pair_are_refused(tmp_path, capsys):
    from mrcr_gen import MrcrRow, write_rows

    messages = [
        {"role": "user", "content": "preamble"},
        {"role": "user", "content": "write an essay on cats"},
        {"role": "assistant", "content": "meow"},
        {"role": "user", "content": "write a poem about dogs"},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": "query"},
    ]
    row = MrcrRow(prompt=json.dumps(messages), answer="abcdefghij", random_string_to_prepend="abcdefghij",
                  n_needles=1, desired_msg_index=1, total_messages=6, n_chars=1, date_added="01-01-2025")
    path = tmp_path / "odd.parquet"
    write_rows([row], path)
    message = f"none of the 2 pairs in 1 row(s) of {path} has a parsable ask and a writing: the pool would be empty"
    with pytest.raises(PoolError) as error:
        mrcr_gen.harvest([path], tmp_path / "pool.parquet")
    assert str(error.value) == message
    assert_refused(capsys, tmp_path / "pool.parquet", message, path)


# --- files of the wrong shape ----------------------------------------------------------------------


def test_missing_columns_are_named(tmp_path, capsys):
    path = tmp_path / "partial.parquet"
    columns = {"prompt": ["[]"], "answer": ["x"], "random_string_to_prepend": ["x"], "date_added": ["01-01-2025"]}
    pq.write_table(pa.table(columns), path)
    message = (
        f"{path} is not an openai/mrcr parquet file: missing column(s) n_needles, "
        "desired_msg_index, total_messages, n_chars"
    )
    for harvest in (mrcr_gen.harvest, harvest_openai):
        with pytest.raises(PoolError) as error:
            harvest([path], tmp_path / "pool.parquet")
        assert str(error.value) == message
    assert_refused(capsys, tmp_path / "pool.parquet", message, path)


def test_missing_columns_are_named_before_rows_are_counted(tmp_path, capsys):
    path = tmp_path / "other.parquet"
    pq.write_table(pa.table({"text": pa.array([], pa.string())}), path)
    message = f"{path}: not a file of any known recipe: columns text"  # no recipe claims it (issue 32)
    assert_refused(capsys, tmp_path / "pool.parquet", message, path)


def test_a_bad_row_is_named_in_one_line(openai_file, tmp_path, capsys):
    table = pq.read_table(openai_file)
    dates = pa.array(["01-01-2025", "2025-01-01"][: table.num_rows])
    path = tmp_path / "bad_date.parquet"
    pq.write_table(table.set_column(table.schema.get_field_index("date_added"), "date_added", dates), path)
    code, stdout, stderr = run_harvest(capsys, path, "--out", tmp_path / "pool.parquet")
    assert code == 2 and stdout == "" and len(stderr.splitlines()) == 1
    assert stderr.startswith(f"mrcr-gen: error: {path} row 1 is not an openai/mrcr row: date_added: String should")
    assert not (tmp_path / "pool.parquet").exists()


def test_a_later_bad_file_leaves_no_pool(openai_file, tmp_path, capsys):
    bogus = tmp_path / "bogus.parquet"
    bogus.write_text("not parquet")
    code, _, stderr = run_harvest(capsys, openai_file, bogus, "--out", tmp_path / "pool.parquet")
    assert code == 2 and stderr.startswith(f"mrcr-gen: error: {bogus}: cannot read as parquet: ")
    assert len(stderr.splitlines()) == 1 and not (tmp_path / "pool.parquet").exists()


# --- MRCR v2 files ---------------------------------------------------------------------------------


def v2_turns(path):
    """(ask, writing) of every turn after the few-shot block of every row, read independently."""
    records = list(csv.DictReader(open(path, newline="", encoding="utf-8"))) if path.suffix == ".csv" else (
        pq.read_table(path).to_pylist()
    )
    turns = []
    for record in records:
        transcript = record["queries"][: len(record["queries"]) - len(record["view_ops"])]
        body = transcript[transcript.index(FEWSHOT_END) + len(FEWSHOT_END):]
        turns += V2_TURN.findall(body)
    return turns


def test_pool_ask_maps_v2_asks():
    from mrcr_gen.recipes.mrcr_v2._harvest import pool_ask

    ask = pool_ask(ask_text("short story", "tide pools", "formal"))
    assert (ask.format, ask.entity, ask.text) == (
        "short story", "tide pools in formal style", "write a short story about tide pools in formal style"
    )
    ask = pool_ask("Write a poem about thinking about dogs in a noir style.")  # split on the first ' about '
    assert (ask.format, ask.entity) == ("poem", "thinking about dogs in a noir style")
    assert pool_ask("write a poem about dogs") is None  # openai/mrcr's form is not v2's
    assert pool_ask("Write a poem about dogs.") is None  # no style
    assert pool_ask("Write a poem about dogs in noir style") is None  # no period
    assert pool_ask("Prepend abc to the first poem about dogs in a noir style.") is None


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_v2_files_are_harvested_with_their_asks_as_a_pools(v2_files, fmt, tmp_path, capsys):
    path = v2_files[fmt]
    turns = v2_turns(path)
    expected = {("write a " + ask.removeprefix("Write a ").removesuffix("."), text) for ask, text in turns}
    report = mrcr_gen.harvest([path], tmp_path / "pool.parquet")
    writings = read_pool(tmp_path / "pool.parquet")
    assert {(w.ask, w.text) for w in writings} == expected and report.writings == len(expected)
    assert report.rows == 4 and report.unparsed == 0
    assert report.pairs == len(turns) // 2  # 2 rows per transcript: each transcript is read once
    assert all(w.entity.endswith(" style") and " in " in w.entity for w in writings)
    assert {w.source for w in writings} == {f"{path.parent.name}/{path.name}"}
    assert not any("EXAMPLE" in w.text or "Prepend" in w.text for w in writings)
    # the openai/mrcr recipe alone says what the file is
    with pytest.raises(PoolError) as error:
        harvest_openai([path], tmp_path / "openai.parquet")
    kind = "a CSV file, not an openai/mrcr parquet file" if fmt == "csv" else (
        "an MRCR v2 file (column 'queries'), not an openai/mrcr one"
    )
    assert str(error.value) == f"{path} is {kind}"

    out = tmp_path / "cli.parquet"
    code, stdout, _ = run_harvest(capsys, path, "--out", out)
    assert code == 0 and stdout.startswith(f"pool {out}: {len(expected):,} distinct writings")
    assert out.read_bytes() == (tmp_path / "pool.parquet").read_bytes()


def test_v2_csv_and_parquet_give_the_same_pool_and_folders_give_their_csv(v2_files, tmp_path, capsys):
    mrcr_gen.harvest([v2_files["csv"]], tmp_path / "csv.parquet")
    mrcr_gen.harvest([v2_files["parquet"]], tmp_path / "parquet.parquet")
    texts = [w.text for w in read_pool(tmp_path / "csv.parquet")]
    assert texts == [w.text for w in read_pool(tmp_path / "parquet.parquet")]
    code, stdout, _ = run_harvest(capsys, v2_files["csv"].parent.parent, "--out", tmp_path / "folder.parquet")
    assert code == 0 and " in 4 rows of 1 file(s)" in stdout


def test_openai_and_v2_files_make_one_pool_that_generates_valid_rows(openai_file, v2_files, tmp_path, capsys):
    pool = tmp_path / "mixed.parquet"
    code, _, err = run_harvest(capsys, openai_file, v2_files["csv"], "--out", pool)
    assert code == 0, err
    sources = {w.source for w in read_pool(pool)}
    assert len(sources) == 2
    out = tmp_path / "ds"
    with pytest.raises(SystemExit) as exit_info:
        gen_main(["--writer", "pool", "--pool", str(pool), "--needles", "2", "--bin", "8192", "--samples", "2",
                  "--out", str(out)])
    assert exit_info.value.code == 0, capsys.readouterr().err
    assert check_dataset(out) == 2


def test_v2_files_of_the_wrong_shape_are_named(tmp_path, capsys):
    path = tmp_path / "partial.csv"
    path.write_text("queries,answer\nq,a\n")
    message = f"{path} is not an MRCR v2 file: missing column(s) {', '.join(V2_COLUMNS[2:])}"
    with pytest.raises(PoolError) as error:
        mrcr_gen.harvest([path], tmp_path / "pool.parquet")
    assert str(error.value) == message
    assert_refused(capsys, tmp_path / "pool.parquet", message, path)


def test_v2_rows_that_are_not_v2_rows_are_named(v2_files, tmp_path, capsys):
    table = pq.read_table(v2_files["parquet"])
    column = table.schema.get_field_index("view_ops")
    path = tmp_path / "broken.parquet"
    pq.write_table(table.set_column(column, "view_ops", pa.array(["no query"] * table.num_rows)), path)
    message = f"{path} row 0 is not an MRCR v2 row: view_ops is not the tail of queries"
    assert_refused(capsys, tmp_path / "pool.parquet", message, path)

    header = ",".join(V2_COLUMNS)
    path = tmp_path / "no_fewshot.csv"
    queries = "User: Write a poem about x in y style.\n\nAssistant: z\n\nQ"
    path.write_text(f'{header}\n"{queries}",a,1,1,Q,1,"(0, 1)",[0],[(0, 1)]\n')
    marker = FEWSHOT_END.strip()
    message = f"{path} row 0 is not an MRCR v2 row: the few-shot block's closing marker '{marker}' is missing"
    assert_refused(capsys, tmp_path / "pool.parquet", message, path)
