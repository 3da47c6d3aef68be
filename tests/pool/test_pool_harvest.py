"""Harvest: every (ask, writing) pair of MRCR files into a pool, with the catalog found."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from mrcr_gen import GenerateConfig, OfflineWriter, bin_by_upper, count_tokens_batch, generate_dataset
from mrcr_gen.pool import POOL_COLUMNS, PoolError, parse_ask, read_pool
from mrcr_gen.recipes.openai_mrcr._harvest import catalog_path, harvest
from tests.support import REAL_ROWS

PREAMBLE_START = "Here are some examples of conversations"


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    out = tmp_path_factory.mktemp("generated")
    config = GenerateConfig(needles=(2, 4), bins=(bin_by_upper(8192),), samples=3, out=out)
    result = generate_dataset(config, OfflineWriter(0))
    return out, list(result.files)


def expected_pairs(files):
    pairs = []
    for path in files:
        for record in pq.read_table(path).to_pylist():
            messages = json.loads(record["prompt"])
            body = messages[1:-1]
            pairs += [(body[i]["content"], body[i + 1]["content"]) for i in range(0, len(body), 2)]
    return pairs


def test_harvest_generated_files(generated, tmp_path):
    out_dir, files = generated
    pool_path = tmp_path / "pool.parquet"
    report = harvest(files, pool_path)
    pairs = expected_pairs(files)
    distinct = set(pairs)
    assert report.pairs == len(pairs) and report.rows == 6 and report.unparsed == 0
    assert report.writings == len(distinct) and report.duplicates == len(pairs) - len(distinct)
    writings = read_pool(pool_path)
    assert {(w.ask, w.text) for w in writings} == distinct
    assert pq.read_schema(pool_path).names == list(POOL_COLUMNS)
    # token counts are exact o200k counts; ids are unique; sources name the files
    assert [w.n_tokens for w in writings] == count_tokens_batch([w.text for w in writings])
    assert len({w.id for w in writings}) == len(writings)
    assert {w.source for w in writings} == {f"{p.parent.name}/{p.name}" for p in files}
    # nothing from the preamble or the final query
    assert not any(PREAMBLE_START in w.text or "(1 indexed)" in w.text for w in writings)
    assert all(w.ask.startswith("write a ") and parse_ask(w.ask) is not None for w in writings)
    catalog = json.loads(catalog_path(pool_path).read_text())
    assert catalog["writings"] == len(writings) and catalog["pairs"] == len(pairs)
    assert sum(catalog["pairs_per_format"].values()) == len(pairs)
    assert sum(catalog["formats"].values()) == len(writings)
    assert set(catalog["entities"]) == {w.entity for w in writings}


def test_harvest_dedupes_and_is_deterministic(generated, tmp_path):
    _, files = generated
    once = harvest(files[:1], tmp_path / "a.parquet")
    twice = harvest([files[0], files[0]], tmp_path / "b.parquet")
    assert twice.writings == once.writings
    assert twice.duplicates == once.duplicates + once.pairs
    again = harvest(files[:1], tmp_path / "c.parquet")
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "c.parquet").read_bytes()
    assert again == once.model_copy(update={"out": again.out, "catalog": again.catalog})


def test_parse_ask():
    ask = parse_ask("write a short scene in a play about the avengers")
    assert (ask.format, ask.entity) == ("short scene in a play", "the avengers")
    ask = parse_ask("write a poem about thinking about dogs")  # split on the first ' about '
    assert (ask.format, ask.entity) == ("poem", "thinking about dogs")
    assert parse_ask("write an essay on cats") is None
    assert parse_ask("Prepend abc to the 1st (1 indexed) poem about cats.") is None


def test_harvest_rejects_non_mrcr_files(tmp_path):
    with pytest.raises(PoolError, match="does not exist"):
        harvest([tmp_path / "missing.parquet"], tmp_path / "pool.parquet")
    bogus = tmp_path / "bogus.parquet"
    bogus.write_text("not parquet")
    with pytest.raises(PoolError, match="not an MRCR parquet file"):
        harvest([bogus], tmp_path / "pool.parquet")


@pytest.mark.skipif(not REAL_ROWS.exists(), reason="real openai/mrcr rows not available")
def test_harvest_real_rows(tmp_path):
    pool_path = tmp_path / "real.parquet"
    report = harvest([REAL_ROWS], pool_path)
    # 385 + 400 + 378 pairs; a few identical (ask, writing) repeats across and within rows
    assert report.rows == 3 and report.pairs == 1163 and report.unparsed == 0
    assert 0 < report.duplicates < 60 and report.writings == report.pairs - report.duplicates
    assert report.formats == 10 and 350 <= report.entities <= 438
    writings = read_pool(pool_path)
    assert not any(PREAMBLE_START in w.text or "======EXAMPLE======" in w.text for w in writings)
    assert not any("Do not include any other text in your response" in w.ask for w in writings)
    mean = report.tokens / report.writings
    assert 300 < mean < 450  # ~367 o200k tokens per writing in real rows
    # the 8-needle row's needle ask brings 8 distinct writings
    per_ask = {}
    for w in writings:
        per_ask[w.ask] = per_ask.get(w.ask, 0) + 1
    assert max(per_ask.values()) >= 8
    catalog = json.loads(catalog_path(pool_path).read_text())
    assert sum(catalog["pairs_per_format"].values()) == 1163


def test_harvest_skips_malformed_messages_and_rejects_prompts_that_are_not_lists(tmp_path):
    from mrcr_gen import MrcrRow, write_rows

    def row(prompt: str) -> MrcrRow:
        return MrcrRow(
            prompt=prompt, answer="abcdefghij", random_string_to_prepend="abcdefghij", n_needles=1,
            desired_msg_index=1, total_messages=6, n_chars=1, date_added="01-01-2025",
        )

    messages = [
        {"role": "user", "content": "preamble"},
        {"role": "user", "content": "write a poem about cats"},
        {"role": "assistant", "content": None},
        "not a message",
        {"role": "assistant", "content": "text"},
        {"role": "user", "content": "write a poem about dogs"},
        {"role": "assistant", "content": "woof"},
        {"role": "user", "content": "query"},
    ]
    write_rows([row(json.dumps(messages))], tmp_path / "odd.parquet")
    report = harvest([tmp_path / "odd.parquet"], tmp_path / "pool.parquet")
    assert (report.pairs, report.unparsed, report.writings) == (3, 2, 1)
    write_rows([row(json.dumps({"role": "user"}))], tmp_path / "dict.parquet")
    with pytest.raises(PoolError, match="not an MRCR parquet file: prompt is a JSON dict, not a list of messages"):
        harvest([tmp_path / "dict.parquet"], tmp_path / "pool2.parquet")
