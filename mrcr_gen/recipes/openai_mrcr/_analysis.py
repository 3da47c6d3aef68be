"""An openai/mrcr row as the per-row failure analysis reads it (`mrcr_gen.eval._analysis`)."""

from __future__ import annotations

from collections.abc import Sequence

from ...eval._analysis import Transcript, chat_transcript
from ._models import QUERY_PATTERN


def transcript_of(messages: Sequence[dict], random_string: str) -> Transcript | None:
    """The row's writings (after the preamble, before the final query), each indexed by its ask's
    message index as `desired_msg_index` is; None when the final query cannot be read."""
    query = QUERY_PATTERN.match(messages[-1]["content"]) if messages else None
    if query is None:
        return None
    return chat_transcript(
        messages, needle_ask="write a " + query["rest"], target=int(query["ordinal"]), prefix=random_string
    )
