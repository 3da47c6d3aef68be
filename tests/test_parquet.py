import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrcr_gen import generate_sample
from mrcr_gen._parquet import RowGroupWriter, row_bytes, text_array, use_lean_memory_pool
from mrcr_gen.recipes.openai_mrcr._rows import MRCR_SCHEMA, rows_to_table, write_rows


def rows(n: int = 3):
    return [generate_sample(2, 8192, seed=seed).row for seed in range(n)]


def test_text_columns_carry_no_statistics_and_integer_columns_do(tmp_path):
    path = tmp_path / "rows.parquet"
    write_rows(rows(), path)
    group = pq.ParquetFile(path).metadata.row_group(0)
    with_statistics = {
        group.column(i).path_in_schema for i in range(group.num_columns) if group.column(i).is_stats_set
    }
    assert with_statistics == {f.name for f in MRCR_SCHEMA if f.type == pa.int64()}


def test_an_aborted_writer_leaves_no_file_and_a_closed_one_the_rows(tmp_path):
    table = rows_to_table(rows())
    with pytest.raises(RuntimeError, match="stop"), RowGroupWriter(tmp_path / "a.parquet", MRCR_SCHEMA) as writer:
        writer.add(table)
        raise RuntimeError("stop")
    assert list(tmp_path.iterdir()) == []
    with RowGroupWriter(tmp_path / "b.parquet", MRCR_SCHEMA) as writer:
        writer.add(table.slice(0, 1))
        writer.add(table.slice(1))
    assert pq.read_table(tmp_path / "b.parquet").equals(table)


@pytest.fixture
def memory_pool(monkeypatch):
    """The process's Arrow pool and ARROW_DEFAULT_MEMORY_POOL, restored after the test."""
    before = pa.default_memory_pool()
    monkeypatch.setenv("ARROW_DEFAULT_MEMORY_POOL", "unset-by-the-test")
    monkeypatch.delenv("ARROW_DEFAULT_MEMORY_POOL")
    yield monkeypatch
    pa.set_memory_pool(before)


def test_the_lean_pool_is_jemalloc_here_and_in_processes_started_later(memory_pool):
    try:
        pa.jemalloc_memory_pool()
    except NotImplementedError:  # a pyarrow without jemalloc: nothing changes
        use_lean_memory_pool()
        assert "ARROW_DEFAULT_MEMORY_POOL" not in os.environ
        return
    use_lean_memory_pool()
    assert pa.default_memory_pool().backend_name == "jemalloc"
    assert os.environ["ARROW_DEFAULT_MEMORY_POOL"] == "jemalloc"


def test_a_pool_the_user_chose_is_kept(memory_pool):
    memory_pool.setenv("ARROW_DEFAULT_MEMORY_POOL", "system")
    before = pa.default_memory_pool().backend_name
    use_lean_memory_pool()
    assert os.environ["ARROW_DEFAULT_MEMORY_POOL"] == "system"
    assert pa.default_memory_pool().backend_name == before


@given(st.lists(st.text(st.characters(exclude_categories=["Cs"]))), st.sampled_from([pa.string(), pa.large_string()]))
def test_text_array_is_pa_array_in_exact_buffers(values, kind):
    built = text_array(values, kind)
    assert built.type == kind and built.equals(pa.array(values, kind))
    assert built.buffers()[2] is None or built.buffers()[2].size == sum(len(v.encode()) for v in values)


def test_text_array_refuses_a_lone_surrogate_as_pa_array_does():
    with pytest.raises(UnicodeEncodeError):
        pa.array(["a\ud800"], pa.string())
    with pytest.raises(UnicodeEncodeError):
        text_array(["a\ud800"])


@given(
    st.lists(st.lists(st.one_of(st.none(), st.text(max_size=20)), max_size=6), max_size=4),
    st.lists(st.one_of(st.none(), st.integers(-5, 5)), max_size=24),
    st.sampled_from([pa.string(), pa.large_string(), pa.binary()]),
    st.integers(0, 3),
)
def test_row_bytes_are_the_text_lengths_plus_4_and_8_per_integer(chunks, integers, kind, start):
    import pyarrow.compute as pc

    values = [[v.encode() if v is not None and kind == pa.binary() else v for v in chunk] for chunk in chunks]
    text = pa.chunked_array([pa.array(chunk, kind) for chunk in values], kind)
    numbers = pa.array((integers + [0] * text.length())[: text.length()], pa.int64())
    table = pa.table({"text": text, "n": numbers}).slice(min(start, text.length()))
    expected = pc.add(pc.add(pc.fill_null(pc.binary_length(table.column("text")), 0), 4), 8).to_pylist()
    assert row_bytes(table) == expected
