"""Issue 22 items 3-5: cache-aware cost, the query-only memorization control, stable per-bin subsets."""

from __future__ import annotations

import json
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from mrcr_gen import read_items, run_eval, summarize_run, write_rows
from mrcr_gen._prices import CACHED_INPUT_PRICES, PRICES, PriceError, cached_price_for
from mrcr_gen.cli._eval import eval_main
from mrcr_gen.eval import EvalConfig, EvalError
from mrcr_gen.eval._control import memorization_test, t_isf, t_sf
from mrcr_gen.eval._subset import per_bin_rows
from mrcr_gen.recipes import RECIPES
from tests.support.chat_server import NO_MEMORY, ChatServer, memorized, query_key

from .conftest import handmade_row
from .test_eval_resume import call, config, reported

# ------------------------------------------------------------------ item 3: cache-aware cost


def test_every_listed_model_has_a_cached_price_below_its_input_price():
    assert set(CACHED_INPUT_PRICES) == set(PRICES)
    assert all(0 < CACHED_INPUT_PRICES[m] < PRICES[m][0] for m in PRICES)


def test_the_cached_price_is_the_flag_then_the_table_then_the_input_price():
    assert cached_price_for("gpt-4.1") == 0.5 and cached_price_for("gpt-5-nano") == 0.005
    assert cached_price_for("gpt-4.1", price_cached=0.2) == 0.2
    assert cached_price_for("my-model", 3.0, 9.0) == 3.0  # no cache discount known: billed as input
    assert cached_price_for("my-model", 3.0, 9.0, 0.3) == 0.3
    assert cached_price_for("my-model") is None
    with pytest.raises(PriceError, match="--price-cached without --price-in and --price-out"):
        cached_price_for("my-model", price_cached=0.3)
    with pytest.raises(PriceError, match="--price-in without --price-out"):
        cached_price_for("my-model", price_in=1.0, price_cached=0.3)


def test_price_cached_alone_for_a_model_without_a_list_price_is_refused(small_data, tmp_path, capsys, api_key):
    with ChatServer("oracle") as server:
        args = [small_data, "--model", "test-model", "--base-url", server.base_url, "--out", tmp_path / "r", "-q"]
        code, _, err = call([*args, "--price-cached", "0.1"], capsys)
        assert server.total_requests == 0
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--price-cached without --price-in" in err


def test_cached_tokens_from_the_server_are_priced_at_the_cached_price(small_data, tmp_path, api_key):
    """The server reports 40% of every prompt as cached (usage.prompt_tokens_details.cached_tokens)."""
    with ChatServer("oracle", cached_share=0.4) as server:
        _, summary = run_eval(config([small_data], tmp_path / "run", server, price_in=2.0, price_out=8.0, price_cached=0.5))
        billed = server.stats()["usage_sent"]
        # A resume without the flags prices the run as before (run.json keeps all three).
        sent = server.total_requests
        _, resumed = run_eval(config([small_data], tmp_path / "run", server))
        assert server.total_requests == sent
    assert resumed["cost_usd"] == summary["cost_usd"] and resumed["price_per_1m"] == summary["price_per_1m"]
    prompt, cached, completion = billed["prompt_tokens"], billed["cached_tokens"], billed["completion_tokens"]
    assert cached > 0 and summary["usage"]["cached_tokens"] == cached and summary["usage"]["prompt_tokens"] == prompt
    assert summary["price_per_1m"] == {"input": 2.0, "cached_input": 0.5, "output": 8.0}
    assert summary["cost_usd"] == pytest.approx(((prompt - cached) * 2.0 + cached * 0.5 + completion * 8.0) / 1e6)
    assert summary["cost_without_cache_usd"] == pytest.approx((prompt * 2.0 + completion * 8.0) / 1e6)
    assert summary["cache_saved_usd"] == pytest.approx(cached * 1.5 / 1e6) and summary["cache_saved_usd"] > 0


def test_a_listed_model_is_billed_its_published_cached_price(small_data, tmp_path, api_key):
    with ChatServer("oracle", cached_share=0.5) as server:
        cfg = EvalConfig(data=[str(small_data)], model="gpt-4.1", out=str(tmp_path / "r"), base_url=server.base_url, limit=3)
        _, summary = run_eval(cfg)
    usage = summary["usage"]
    uncached = usage["prompt_tokens"] - usage["cached_tokens"]
    expected = (uncached * 2.0 + usage["cached_tokens"] * 0.5 + usage["completion_tokens"] * 8.0) / 1e6
    assert usage["cached_tokens"] > 0 and summary["cost_usd"] == pytest.approx(expected)


def test_a_run_priced_before_cached_prices_prices_cached_tokens_as_input(small_data, tmp_path, api_key):
    with ChatServer("oracle", cached_share=0.5) as server:
        run_eval(config([small_data], tmp_path / "r", server, limit=2, price_in=1.0, price_out=1.0, price_cached=0.1))
    run_file = tmp_path / "r" / "run.json"
    run = json.loads(run_file.read_text())
    run["price_per_1m"] = {"input": 1.0, "output": 1.0}  # as an older mrcr-eval wrote it
    run_file.write_text(json.dumps(run))
    summary = summarize_run(tmp_path / "r")
    assert summary["cache_saved_usd"] == 0 and summary["cost_usd"] == summary["cost_without_cache_usd"]


# ------------------------------------------------------------------ item 4: the query-only control


def _answers(data) -> dict[str, str]:
    """What a model that has seen every row of `data` remembers: each final query's right reply."""
    items = [item for path in data for item in read_items(path)]
    return {query_key(item.messages): item.answer for item in items}


def test_a_query_only_control_sends_the_preamble_and_the_final_query_alone(gen_data, tmp_path, api_key):
    rows = [item.messages for item in read_items(gen_data)]
    with ChatServer(memorized({})) as server:
        _, summary = run_eval(config([gen_data], tmp_path / "control", server, control="query-only"))
        sent = sorted((r["messages"] for r in server.requests), key=lambda m: m[-1]["content"])
    assert sent == sorted(([m[0], m[-1]] for m in rows), key=lambda m: m[-1]["content"])
    assert summary["control"] == "query-only" and summary["official"] is False and "NOT A SCORE" in summary["scoring"]
    assert summary["settings"]["control"] == "query-only"
    # Floors are the row's own (from the whole conversation), as in the full run.
    assert all(c["floor_random_writing"] is not None for c in summary["cells"])


def test_a_control_is_not_written_into_its_full_runs_folder(small_data, tmp_path, api_key):
    with ChatServer("oracle") as server:
        run_eval(config([small_data], tmp_path / "run", server, limit=1))
        with pytest.raises(EvalError, match=r"control: \(not set\) -> \"query-only\""):
            run_eval(config([small_data], tmp_path / "run", server, limit=1, control="query-only"))
        assert server.total_requests == 1


def test_an_unknown_control_is_a_usage_error(small_data, tmp_path, capsys, api_key):
    code, _, err = call([small_data, "--model", "m", "--out", tmp_path / "r", "--control", "no-query"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "query-only" in err


def _full_and_control(data, tmp_path, policy):
    with ChatServer(policy) as server:
        run_eval(config(data, tmp_path / "full", server))
        run_eval(config(data, tmp_path / "control", server, control="query-only"))


def test_compare_flags_a_control_that_has_memorized_the_rows(small_data, tmp_path, capsys, api_key):
    _full_and_control([small_data], tmp_path, memorized(_answers([small_data])))
    code, out, _ = call(["compare", tmp_path / "control", tmp_path / "full", "--json"], capsys)
    assert code == 0
    full, control = json.loads(out)  # the control is put right after its full run
    assert full["run"] == str(tmp_path / "full") and control["full_run"] == str(tmp_path / "full")
    test = control["memorization"]
    assert control["mean_score"] == 1.0 and test["rows"] == 12 and test["memorized"] and test["p_value"] < 0.01
    assert test["difference"] > test["margin"] > 0
    code, out, _ = call(["compare", tmp_path / "full", tmp_path / "control"], capsys)
    assert code == 0 and "MEMORIZED" in out and "(control: query-only)" in out


def test_compare_does_not_flag_a_control_of_a_model_that_never_saw_the_rows(small_data, tmp_path, capsys, api_key):
    _full_and_control([small_data], tmp_path, memorized({}))
    code, out, _ = call(["compare", tmp_path / "full", tmp_path / "control", "--json"], capsys)
    full, control = json.loads(out)
    assert full["mean_score"] == 1.0  # with the conversation it solves every row
    test = control["memorization"]
    assert control["mean_score"] < test["floor_mean"] and not test["memorized"] and test["p_value"] > 0.5
    replies = [json.loads(line)["response"] for line in (tmp_path / "control" / "results.jsonl").read_text().splitlines()]
    assert all(r.endswith(NO_MEMORY) for r in replies)
    code, out, _ = call(["compare", tmp_path / "full", tmp_path / "control"], capsys)
    assert "at the floor" in out and "MEMORIZED" not in out


def test_a_control_on_some_memorized_rows_is_flagged_only_past_the_margin(small_data, tmp_path, api_key):
    """3 of 12 rows remembered: the p-value is the one of the paired t-test over the 12 rows."""
    from scipy import stats

    answers = dict(list(_answers([small_data]).items())[:3])
    with ChatServer(memorized(answers)) as server:
        _, summary = run_eval(config([small_data], tmp_path / "control", server, control="query-only"))
    records = [json.loads(line) for line in (tmp_path / "control" / "results.jsonl").read_text().splitlines()]
    scores, floors = [r["score"] for r in records], [r["floor_random_writing"] for r in records]
    expected = stats.ttest_rel(scores, floors, alternative="greater").pvalue
    assert summary["memorization"]["p_value"] == pytest.approx(expected, rel=1e-6)
    assert summary["memorization"]["memorized"] == (expected < 0.01)


def test_a_v2_control_sends_the_few_shot_block_and_the_final_query(tmp_path, api_key):
    from mrcr_gen.recipes.mrcr_v2 import V2Config, V2OfflineWriter, generate_v2, v2_bucket
    from mrcr_gen.recipes.mrcr_v2._text import TRANSCRIPT_OPEN

    out = tmp_path / "v2"
    generate_v2(V2Config(needles=(2,), buckets=(v2_bucket(8192),), samples=2, rows_per_transcript=1, seed=3, out=out),
                V2OfflineWriter(3))
    (path,) = sorted(out.rglob("*.csv"))
    items = list(read_items(path))
    with ChatServer(memorized({})) as server:
        _, summary = run_eval(config([path], tmp_path / "control", server, control="query-only"))
        sent = [r["messages"] for r in server.requests]
    assert summary["control"] == "query-only" and len(sent) == len(items) == 2
    for item in items:
        queries = item.messages[0]["content"]
        few_shot = queries[: queries.index(TRANSCRIPT_OPEN) + len(TRANSCRIPT_OPEN)]
        final = queries[queries.rfind("User: Prepend ") :]
        assert [{"role": "user", "content": few_shot + final}] in sent


@settings(max_examples=200, deadline=None)
@given(t=st.floats(-30, 30), df=st.integers(1, 400))
def test_students_t_matches_scipy(t, df):
    from scipy import stats

    assert t_sf(t, df) == pytest.approx(stats.t.sf(t, df), rel=1e-7, abs=1e-12)


@settings(max_examples=50, deadline=None)
@given(p=st.sampled_from([0.001, 0.01, 0.05, 0.2]), df=st.integers(1, 400))
def test_the_margin_quantile_matches_scipy(p, df):
    from scipy import stats

    assert t_isf(p, df) == pytest.approx(stats.t.isf(p, df), rel=1e-6)


@settings(max_examples=100, deadline=None)
@given(pairs=st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)), min_size=2, max_size=60))
def test_the_memorization_test_is_scipys_one_sided_paired_t_test(pairs):
    from scipy import stats

    test = memorization_test(pairs)
    differences = [s - f for s, f in pairs]
    if max(differences) - min(differences) < 1e-9:
        return  # no spread: scipy gives nan, the test decides by the sign of the difference
    expected = stats.ttest_rel([s for s, _ in pairs], [f for _, f in pairs], alternative="greater").pvalue
    assert test["p_value"] == pytest.approx(expected, rel=1e-6, abs=1e-12)
    # Flagged exactly when the mean difference is past the margin.
    if abs(test["difference"] - test["margin"]) > 1e-9:
        assert test["memorized"] == (test["difference"] > test["margin"])


def test_the_memorization_test_needs_two_rows():
    assert memorization_test([(1.0, 0.1)])["p_value"] is None and not memorization_test([])["memorized"]
    assert memorization_test([(1.0, 0.1), (1.0, 0.1)])["memorized"]  # no spread, above the floor
    assert not memorization_test([(0.0, 0.1), (0.0, 0.1)])["memorized"]


# ------------------------------------------------------------------ item 5: stable subsets


@pytest.fixture(scope="module")
def cells_data(tmp_path_factory):
    """Two files of 2/4/8-needle rows in two bins (below 4096 tokens, and (4096, 8192] by long
    writings): 6 cells of 5 and 3 rows."""
    from mrcr_gen import MrcrRow
    from tests.support.rowkit import make_row

    folder = tmp_path_factory.mktemp("cells")
    write_rows([handmade_row(n, seed) for n in (2, 4, 8) for seed in range(5)], folder / "a.parquet")
    long = [MrcrRow(**make_row(seed=7000 + i, n_needles=n, pairs=14, filler=330)) for i, n in enumerate([2, 4, 8] * 3)]
    write_rows(long, folder / "b.parquet")
    return [folder / "a.parquet", folder / "b.parquet"]


def _kept(files, k, seed=0):
    from mrcr_gen._files import file_sha256

    paths = [str(p) for p in files]
    shas = {p: file_sha256(p) for p in paths}
    return per_bin_rows(paths, shas, k, seed, recipes=RECIPES, tokenizer_spec="o200k_base", stored=lambda *_: None)


def _cells(files):
    cells: dict = {}
    for path in files:
        for item in read_items(path):
            cells.setdefault((item.bin_upper, item.n_needles), set()).add((str(path), item.row))
    return cells


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(small=st.integers(1, 6), large=st.integers(1, 6), seed=st.integers(0, 2**32), reverse=st.booleans())
def test_per_bin_subsets_nest_and_hold_k_rows_per_cell_in_any_file_order(cells_data, small, large, seed, reverse):
    small, large = min(small, large), max(small, large)
    files = cells_data[::-1] if reverse else cells_data
    fewer, more = _kept(files, small, seed), _kept(cells_data, large, seed)
    everything = {key for keys in _cells(cells_data).values() for key in keys}
    assert fewer <= more <= everything
    for members in _cells(cells_data).values():
        assert len(fewer & members) == min(small, len(members))


def test_per_bin_subsets_are_the_same_rows_on_another_machine(cells_data, tmp_path):
    """Other paths (another machine's checkout) keep the same rows; another seed keeps others."""
    moved = [shutil.copy(path, tmp_path / f"copy-{path.name}") for path in cells_data]
    names = {str(p): p.name for p in cells_data} | {str(p): p.name.removeprefix("copy-") for p in moved}

    def by_name(kept):
        return {(names[path], row) for path, row in kept}

    assert by_name(_kept(cells_data, 2)) == by_name(_kept(moved, 2))
    assert by_name(_kept(cells_data, 2, seed=1)) != by_name(_kept(cells_data, 2))
    assert len(_cells(cells_data)) == 6


def test_per_bin_is_recorded_and_a_narrower_k_resumes_as_a_fresh_run(cells_data, tmp_path, api_key):
    with ChatServer("oracle") as server:
        _, wide = run_eval(config(cells_data, tmp_path / "run", server, per_bin=2))
        assert server.total_requests == 12 and wide["n_rows"] == 12
        _, narrow = run_eval(config(cells_data, tmp_path / "run", server, per_bin=1))
        assert server.total_requests == 12  # the K=1 rows are among the K=2 rows: nothing is sent
        _, fresh = run_eval(config(cells_data, tmp_path / "fresh", server, per_bin=1))
    assert reported(narrow) == reported(fresh) and narrow["n_rows"] == 6
    assert all(cell["count"] == 1 for cell in narrow["cells"])
    selection = json.loads((tmp_path / "run" / "run.json").read_text())["selection"]
    assert selection["per_bin"]["k"] == 1 and selection["per_bin"]["seed"] == 0
    assert json.loads((tmp_path / "run" / "run.json").read_text())["options"]["per_bin"] == 1


def test_per_bin_applies_before_limit_and_the_window(cells_data, tmp_path, api_key):
    with ChatServer("oracle") as server:
        _, limited = run_eval(config(cells_data, tmp_path / "a", server, per_bin=2, limit=5))
        _, windowed = run_eval(config(cells_data, tmp_path / "b", server, per_bin=2, max_context_window=4096))
    assert limited["n_rows"] == 5
    # the 6 rows of the 8192 bin stay selected, as skipped rows (they count 0 in their bin)
    assert windowed["n_rows"] == 6 and windowed["skipped"]["count"] == 6


def test_per_bin_must_be_positive(small_data, tmp_path, capsys, api_key):
    code, _, err = call([small_data, "--model", "m", "--out", tmp_path / "r", "--per-bin", "0"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1
    with pytest.raises(ValidationError):
        EvalConfig(data=["x"], model="m", out="o", per_bin=0)
