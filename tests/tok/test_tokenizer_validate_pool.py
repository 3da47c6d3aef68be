"""The validator recounts with the card's (or the named) tokenizer; pools remember theirs."""

from __future__ import annotations

import json
import shutil

import pytest

from mrcr_gen import validate_paths
from mrcr_gen._tokens import count_tokens_batch
from mrcr_gen.cli._validate import validate_main
from mrcr_gen.pool import PoolWriter, read_pool
from mrcr_gen.pool._pool import pool_tokenizer
from mrcr_gen.recipes.openai_mrcr._harvest import harvest


def run(capsys, *args):
    with pytest.raises(SystemExit) as exc:
        validate_main([*map(str, args)])
    out, err = capsys.readouterr()
    return exc.value.code, out, err


def test_validator_recounts_with_the_cards_tokenizer(tiny_data, tiny_spec):
    report = validate_paths([tiny_data], workers=1)
    assert report.exit_code == 0, report.findings[:3]
    assert set(report.summary.tokenizers.values()) == {tiny_spec}
    assert report.summary.by_bin == {"(8192, 16384]": {"2": 3, "4": 3}}


def test_a_shards_card_or_the_sidecars_name_the_tokenizer(tiny_data, tiny_spec, tmp_path):
    """`--shard K/N` writes README.shard-K-of-N.md, not README.md: its tokenizer counts, and without
    any card the sidecars' record of the tokenizer does (never a false token_bin error)."""
    sharded = tmp_path / "sharded"
    shutil.copytree(tiny_data, sharded)
    (sharded / "README.md").rename(sharded / "README.shard-1-of-2.md")
    report = validate_paths([sharded], workers=1)
    assert report.exit_code == 0, report.findings[:3]
    assert set(report.summary.tokenizers.values()) == {tiny_spec}
    (sharded / "README.shard-1-of-2.md").unlink()
    report = validate_paths([sharded], workers=1)
    assert report.exit_code == 0, report.findings[:3]
    assert set(report.summary.tokenizers.values()) == {tiny_spec}


def test_worker_processes_count_with_the_spec_they_receive(tiny_data, tiny_spec, monkeypatch):
    import mrcr_gen.validate._files as files

    monkeypatch.setattr(files, "POOL_MIN_BYTES", 0)  # small files still go to the process pool
    in_pool = validate_paths([tiny_data], workers=2)
    in_process = validate_paths([tiny_data], workers=1)
    assert in_pool.exit_code == 0 and in_pool.summary == in_process.summary
    assert set(in_pool.summary.tokenizers.values()) == {tiny_spec}


def test_validator_with_another_tokenizer_flags_every_row_out_of_its_bin(tiny_data):
    report = validate_paths([tiny_data], workers=1, tokenizer="o200k_base")
    flagged = {(f.file, f.row) for f in report.findings if f.check == "token_bin"}
    assert len(flagged) == report.summary.rows == 6 and report.exit_code == 1
    assert "(8192, 16384]" not in report.summary.by_bin  # binned by the recount, not the card


def test_validator_flags_exactly_the_row_recounted_out_of_its_bin(tiny_data, tmp_path, capsys):
    data = tmp_path / "data"
    shutil.copytree(tiny_data, data)
    sidecar = data / "4needle" / "4needle_0.samples.jsonl"
    records = [json.loads(line) for line in sidecar.read_text().splitlines()]
    records[1]["bin"] = "(16384, 32768]"  # the row claims a bin its recount leaves
    sidecar.write_text("".join(json.dumps(r) + "\n" for r in records))
    code, out, _ = run(capsys, data, "--workers", "1", "--json", "-")
    report = json.loads(out)
    assert code == 1
    assert [(f["file"].endswith("4needle_0.parquet"), f["row"], f["check"]) for f in report["findings"]] == [(True, 1, "token_bin")]
    assert "generated for bin (16384, 32768]" in report["findings"][0]["message"]
    assert "(8192, 16384]" in report["findings"][0]["message"]


def test_unloadable_card_tokenizer_is_a_file_finding(tiny_data, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(tiny_data, data)
    card = data / "README.md"
    card.write_text(card.read_text().replace('  tokenizer: "hf:', '  tokenizer: "hf:/gone'))
    report = validate_paths([data], workers=1)
    assert {(f.row, f.check) for f in report.findings} == {(None, "token_bin")}
    assert "pass --tokenizer" in report.findings[0].message
    assert validate_paths([data], workers=1, tokenizer=card_spec(tiny_data)).exit_code == 0


def card_spec(folder):
    from mrcr_gen._card import card_tokenizer

    return card_tokenizer((folder / "README.md").read_text())


def test_bad_tokenizer_option_is_exit_2(capsys, tiny_data):
    code, _, err = run(capsys, tiny_data, "--tokenizer", "nope")
    assert code == 2 and err.startswith("mrcr-validate: error: --tokenizer: unknown tokenizer 'nope'")


def test_harvest_counts_with_the_tokenizer_and_generation_reuses_or_recounts(tiny_data, tiny_spec, tmp_path):
    files = sorted(tiny_data.rglob("*.parquet"))
    report = harvest(files, tmp_path / "pool.parquet", tokenizer=tiny_spec)
    writings = read_pool(tmp_path / "pool.parquet")
    assert report.tokenizer == tiny_spec and pool_tokenizer(tmp_path / "pool.parquet") == tiny_spec
    assert [w.n_tokens for w in writings] == count_tokens_batch([w.text for w in writings], tokenizer=tiny_spec)
    catalog = json.loads((tmp_path / "pool.catalog.json").read_text())
    assert catalog["tokenizer"]["spec"] == tiny_spec
    # A pool counted by one tokenizer, used with another: recounted exactly.
    as_o200k = PoolWriter.from_file(tmp_path / "pool.parquet", "o200k_base")
    texts = [w.text for ask in as_o200k.asks() for w in as_o200k.writings([(ask, i) for i in range(as_o200k.n_variants(ask))])]
    counts = [w.n_tokens for ask in as_o200k.asks() for w in as_o200k.writings([(ask, i) for i in range(as_o200k.n_variants(ask))])]
    assert counts == count_tokens_batch(texts)
    default = harvest(files, tmp_path / "o200k.parquet")
    assert pool_tokenizer(tmp_path / "o200k.parquet") == "o200k_base" and "tokenizer" not in json.loads((tmp_path / "o200k.catalog.json").read_text())
    assert default.tokens == sum(count_tokens_batch([w.text for w in read_pool(tmp_path / "o200k.parquet")]))
