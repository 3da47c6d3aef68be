"""Properties of generated MRCR v2 rows, each checked against the flat text alone (with the
independent re-solver in tests/support/v2_resolve.py and whole-text token counts)."""

from __future__ import annotations

import hashlib
import string
from collections import Counter

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mrcr_gen import count_tokens
from mrcr_gen.recipes.mrcr_v2 import V2Assembler, V2Config, V2OfflineWriter, bucket_rows, load_v2_catalog, v2_bucket
from mrcr_gen.recipes.mrcr_v2._rows import iter_v2_rows
from tests.support.v2_resolve import solve

ASSEMBLER = V2Assembler(writer=V2OfflineWriter(0), catalog=load_v2_catalog())
ALNUM = set(string.ascii_letters + string.digits)


def check_row(row, n_needles: int, lowest: int, highest: int, tokenizer: str = "o200k_base") -> None:
    solved = solve(row.queries)
    transcript = row.queries[: len(row.queries) - len(row.view_ops)]
    assert row.view_ops == row.queries[row.queries.rfind("User: Prepend ") :]
    # counts and distinct writings
    assert len(solved.needle_turns) == n_needles == row.num_relevant
    assert len(set(solved.writings)) == n_needles
    # hash
    assert len(solved.hash) == 12 and set(solved.hash) <= ALNUM
    assert solved.hash not in transcript
    # answer
    assert row.answer == solved.expected_answer
    # lengths: the whole string as one text
    assert row.context_len == count_tokens(row.queries, tokenizer)
    assert lowest <= row.context_len <= highest
    assert row.answer_token_count == count_tokens(solved.writings[solved.ordinal - 1], tokenizer)
    # positions: turn indices, and token spans of whole turns counted on prefixes of the text
    assert list(row.index_positions_of_seeds) == solved.needle_turns
    spans = []
    for i in solved.needle_turns:
        start_char = solved.turns[i][2]
        end_char = solved.turns[i + 1][2] if i + 1 < len(solved.turns) else len(transcript)
        spans.append((count_tokens(row.queries[:start_char], tokenizer), count_tokens(row.queries[:end_char], tokenizer)))
    assert list(row.relevant_context_positions) == spans
    assert row.answer_context_position == spans[solved.ordinal - 1]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n_needles=st.sampled_from([1, 2, 4, 8]),
    target=st.integers(min_value=4500, max_value=14000),
    seed=st.integers(min_value=0, max_value=2**32),
)
def test_every_row_of_a_transcript_re_solves_from_its_text(n_needles, target, seed):
    lowest = target - 1500
    transcript = ASSEMBLER.build(n_needles=n_needles, target=target, lowest=lowest, seed=seed)
    hashes = Counter()
    for key, ordinal in transcript.pairs():
        row = transcript.row(key, ordinal)
        check_row(row, n_needles, lowest, target)
        hashes[solve(row.queries).hash] += 1
    # one hash per key, and no two keys share one
    assert len(hashes) == len(transcript.needle_keys)
    assert set(hashes.values()) == {n_needles}


def test_filler_never_uses_a_needle_topic():
    catalog = load_v2_catalog()
    assert not set(catalog.needle_topics) & set(catalog.filler_topics)
    transcript = ASSEMBLER.build(n_needles=2, target=30000, lowest=20000, seed=3)
    needle_asks = {k.ask for k in catalog.needle_keys}
    filler_turns = [t for t in transcript.turns if t.key not in transcript.hashes]
    assert filler_turns and not any(t.key.ask in needle_asks for t in filler_turns)
    assert len(transcript.needle_keys) > 1  # several needle keys share a transcript


def test_bucket_gets_exactly_samples_rows_spread_over_it():
    config = V2Config(needles=(2,), buckets=(v2_bucket(16384),), samples=25, rows_per_transcript=4, seed=1)
    bucket = v2_bucket(16384)
    rows = list(bucket_rows(ASSEMBLER, config, 2, bucket))
    assert len(rows) == 25
    per_transcript = Counter(t for t, _ in rows)
    assert max(per_transcript.values()) <= 4 and len(per_transcript) == 7
    lengths = sorted(row.context_len for _, row in rows)
    assert all(length in bucket for length in lengths)
    # spread: the transcripts' lengths cover the bucket (golden-ratio targets), not one corner
    quarters = Counter(min(3, (length - 8193) * 4 // 8192) for length in lengths)
    assert len(quarters) >= 3


def test_same_seed_same_bytes_and_csv_matches_parquet(tmp_path):
    def make(out, fmt):
        from mrcr_gen.recipes.mrcr_v2 import generate_v2

        generate_v2(V2Config(needles=(2,), buckets=(v2_bucket(8192),), samples=4, seed=9, out=out, format=fmt), V2OfflineWriter(9))
        return out / "2needle" / f"mrcr_v2_2needle_in_(4096,8192).{fmt}"

    first, second = make(tmp_path / "a", "csv"), make(tmp_path / "b", "csv")
    assert hashlib.sha256(first.read_bytes()).digest() == hashlib.sha256(second.read_bytes()).digest()
    parquet = make(tmp_path / "c", "parquet")
    assert list(iter_v2_rows(first)) == list(iter_v2_rows(parquet))
    frame = pd.read_csv(first)  # the upstream tooling reads it with pandas
    assert list(frame.columns) == ["queries", "answer", "context_len", "answer_token_count", "view_ops", "num_relevant",
                                   "answer_context_position", "index_positions_of_seeds", "relevant_context_positions"]
    assert frame["answer_context_position"][0].startswith("(")


def test_needles_that_cannot_fit_say_so():
    from mrcr_gen import AssemblyError

    with pytest.raises(AssemblyError, match="cannot fit"):
        ASSEMBLER.build(n_needles=8, target=600, lowest=500, seed=0)


def test_rerun_keeps_complete_files_and_rewrites_changed_ones(tmp_path):
    from mrcr_gen.recipes.mrcr_v2 import generate_v2

    config = V2Config(needles=(2,), buckets=(v2_bucket(8192), v2_bucket(16384)), samples=2, seed=4, out=tmp_path)
    generate_v2(config, V2OfflineWriter(4))
    small = tmp_path / "2needle" / "mrcr_v2_2needle_in_(4096,8192).csv"
    large = tmp_path / "2needle" / "mrcr_v2_2needle_in_(8192,16384).csv"
    stamps = {p: p.stat().st_mtime_ns for p in (small, large)}
    large.unlink()  # as if the run had been interrupted before this file
    reused = []
    generate_v2(config, V2OfflineWriter(4), on_reused=reused.append)
    assert reused == [2] and small.stat().st_mtime_ns == stamps[small] and large.is_file()
    more = config.model_copy(update={"samples": 3})
    generate_v2(more, V2OfflineWriter(4), on_reused=reused.append, overwrite=True)
    assert reused == [2] and len(list(iter_v2_rows(small))) == 3


def test_a_folder_holds_one_generation_another_is_refused_unless_overwrite(tmp_path):
    from mrcr_gen._card import FolderTaken
    from mrcr_gen.recipes.mrcr_v2 import generate_v2

    config = V2Config(needles=(2,), buckets=(v2_bucket(8192), v2_bucket(16384)), samples=2, seed=4, out=tmp_path)
    generate_v2(config, V2OfflineWriter(4))
    parquet = config.model_copy(update={"format": "parquet", "buckets": (v2_bucket(8192),)})
    with pytest.raises(FolderTaken, match=r'--bin \["\(4096, 8192\]", "\(8192, 16384\]"\] there, \["\(4096, 8192\]"\] here; --format "csv" there, "parquet" here\)'):
        generate_v2(parquet, V2OfflineWriter(4))
    generate_v2(parquet, V2OfflineWriter(4), overwrite=True)
    files = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert files == ["2needle/mrcr_v2_2needle_in_(4096,8192).parquet", "2needle/mrcr_v2_2needle_in_(4096,8192).samples.jsonl", "README.md"]


def test_shards_write_disjoint_files_that_together_are_the_whole(tmp_path):
    from mrcr_gen.recipes.mrcr_v2 import generate_v2

    base = V2Config(needles=(2, 4), buckets=(v2_bucket(8192),), samples=2, seed=6)
    generate_v2(base.model_copy(update={"out": tmp_path / "all"}), V2OfflineWriter(6))
    for k in (1, 2):
        generate_v2(base.model_copy(update={"out": tmp_path / "parts", "shard": (k, 2)}), V2OfflineWriter(6))
    whole = {p.relative_to(tmp_path / "all"): p.read_bytes() for p in (tmp_path / "all").rglob("*.csv")}
    parts = {p.relative_to(tmp_path / "parts"): p.read_bytes() for p in (tmp_path / "parts").rglob("*.csv")}
    assert len(whole) == 2 and whole == parts
    assert (tmp_path / "parts" / "README.shard-2-of-2.md").is_file()


def test_the_fewshot_block_takes_750_to_800_tokens_as_upstream():
    """Issue 33 item 9: upstream draws the few-shot block again until it takes 750-800 tokens
    (`generate_fewshot_prompt`); so do we, else the closest draw (a writer whose examples never fit)."""
    import random

    from mrcr_gen.recipes.mrcr_v2._assembler import FEWSHOT_TOKENS

    assembler = V2Assembler(V2OfflineWriter(0), load_v2_catalog())
    rng = random.Random(33)
    counts = []
    for _ in range(60):
        text, tokens = assembler.fewshot(rng)
        assert tokens == count_tokens(text)
        counts.append(tokens)
    assert all(FEWSHOT_TOKENS[0] <= n <= FEWSHOT_TOKENS[1] for n in counts), counts
    transcript = assembler.build(n_needles=2, target=16384, lowest=8193, seed=5)
    assert FEWSHOT_TOKENS[0] <= transcript.fewshot_tokens <= FEWSHOT_TOKENS[1]
