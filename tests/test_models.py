"""Model invariants that must fail as validation errors, never as stray exceptions."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from mrcr_gen import Message, generate_sample
from mrcr_gen.recipes.openai_mrcr._models import Sample


def test_a_target_ordinal_beyond_the_needles_is_a_validation_error():
    sample = generate_sample(2, 8192, seed=1)
    record = sample.model_dump()
    record["target_ordinal"] = 3
    with pytest.raises(ValidationError, match="target_ordinal must be at most n_needles"):
        Sample(**record)


def test_a_message_is_user_or_assistant_as_the_validator_requires():
    assert Message(role="assistant", content="x").role == "assistant"
    with pytest.raises(ValidationError):
        Message(role="system", content="You are a helpful assistant.")
