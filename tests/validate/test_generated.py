"""Every row the generator makes validates clean, token bin included."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mrcr_gen import generate_sample
from mrcr_gen.recipes.openai_mrcr._checks import check_row


@given(seed=st.integers(0, 2**20), n_needles=st.integers(1, 8), bin_upper=st.sampled_from([8192, 16384]))
@settings(max_examples=25, deadline=None)
def test_generated_rows_validate_clean(seed: int, n_needles: int, bin_upper: int) -> None:
    sample = generate_sample(n_needles=n_needles, bin_upper=bin_upper, seed=seed)
    result = check_row(sample.row.model_dump(), count_tokens=True)
    assert result.findings == (), [f.message for f in result.findings]
    assert result.n_tokens == sample.n_tokens
    assert result.bin == sample.bin
