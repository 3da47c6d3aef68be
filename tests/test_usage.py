"""Issue 34 deliverable 2 and items 11-12: the usage ledger (`mrcr_gen._usage`), each source's
token convention, and costs without float noise."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from inspect_ai.model import ModelUsage

from mrcr_gen._usage import Usage, batch_price, cost, from_inspect, from_openai, from_record, ledger_usage, to_inspect

PRICE = {"input": 0.4, "cached_input": 0.1, "output": 1.6}


def test_openai_usage_includes_the_cached_tokens_in_the_prompt():
    body = {"prompt_tokens": 8000, "completion_tokens": 50, "prompt_tokens_details": {"cached_tokens": 4800},
            "completion_tokens_details": {"reasoning_tokens": 20}}  # fmt: skip
    assert from_openai(body) == Usage(prompt_tokens=8000, completion_tokens=50, reasoning_tokens=20, cached_tokens=4800)
    assert from_openai({"prompt_tokens": 5, "prompt_tokens_details": None}) == Usage(prompt_tokens=5)


def test_inspect_usage_excludes_the_cache_reads_from_its_input_tokens():
    # What inspect_ai's OpenAI provider records for prompt_tokens 8000 of which 4800 cached.
    logged = ModelUsage(input_tokens=3200, output_tokens=50, total_tokens=8050, input_tokens_cache_read=4800)
    assert from_inspect(logged) == Usage(prompt_tokens=8000, completion_tokens=50, cached_tokens=4800)
    written = ModelUsage(input_tokens=100, output_tokens=5, input_tokens_cache_write=900)
    assert from_inspect(written).prompt_tokens == 1000


def test_to_inspect_writes_what_inspect_reads_back_as_our_prompt():
    exported = ModelUsage(**to_inspect(Usage(prompt_tokens=1000, completion_tokens=10, cached_tokens=600)))
    assert exported.input_tokens == 400 and exported.input_tokens_cache_read == 600 and exported.total_tokens == 1010
    # Inspect's own rule: the true input is input + cache read + cache write.
    assert exported.input_tokens + (exported.input_tokens_cache_read or 0) == 1000


@given(
    prompt=st.integers(0, 10**7),
    cached=st.integers(0, 10**7),
    completion=st.integers(0, 10**6),
    reasoning=st.integers(0, 10**6),
)
def test_inspect_round_trip_keeps_every_token(prompt, cached, completion, reasoning):
    usage = Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        reasoning_tokens=reasoning,
        cached_tokens=min(cached, prompt),
    )
    assert from_inspect(ModelUsage(**to_inspect(usage))) == usage


def test_cache_saved_has_no_float_noise():
    usage = Usage(prompt_tokens=3, completion_tokens=0, cached_tokens=1)
    price = {"input": 0.1, "cached_input": 0.0, "output": 0.0}
    naive = (3 * 0.1) / 1e6 - (2 * 0.1) / 1e6
    assert naive != 0.1 / 1e6  # what the old subtraction showed
    assert cost(price, usage)["cache_saved_usd"] == 1e-07


@given(prompt=st.integers(0, 10**8), cached=st.integers(0, 10**8), completion=st.integers(0, 10**7))
def test_costs_add_up(prompt, cached, completion):
    usage = Usage(prompt_tokens=prompt, completion_tokens=completion, cached_tokens=cached)
    costs = cost(PRICE, usage)
    assert costs["cache_saved_usd"] == round(costs["cost_without_cache_usd"] - costs["cost_usd"], 10)
    assert 0 <= costs["cost_usd"] <= costs["cost_without_cache_usd"]


def test_batch_price_halves_every_price_and_keeps_the_list():
    assert batch_price(PRICE) == {
        "input": 0.2,
        "cached_input": 0.05,
        "output": 0.8,
        "batch_discount": 0.5,
        "list": PRICE,
    }


def test_a_shared_reply_is_counted_once():
    usage = {"prompt_tokens": 100, "completion_tokens": 10, "cached_tokens": None}
    pairs = (("d", "b1"), ("d", "b1"), ("d", "b2"), ("e", "b1"))
    rows = [{"digest": d, "batch_id": b, "usage": usage} for d, b in pairs]
    assert ledger_usage(rows, shared=True).prompt_tokens == 300  # b1's reply to d once; b2 resent it
    assert ledger_usage(rows).prompt_tokens == 400  # online: each row was its own request
    assert from_record(usage) == Usage(prompt_tokens=100, completion_tokens=10)
