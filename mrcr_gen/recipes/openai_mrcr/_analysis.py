"""An openai/mrcr row as the per-row failure analysis reads it (`mrcr_gen.eval._analysis`)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ...eval._analysis import Transcript, Writing
from ._models import QUERY_PATTERN

# "write a {format} about {entity}": formats never hold " about ", entities may.
ASK_PATTERN = re.compile(r"write an? (?P<format>.+?) about (?P<entity>.+)\Z", re.DOTALL)


def transcript_of(messages: Sequence[dict], random_string: str) -> Transcript | None:
    """The row's writings (after the preamble, before the final query), each indexed by its ask's
    message index as `desired_msg_index` is; None when the final query cannot be read."""
    query = QUERY_PATTERN.match(messages[-1]["content"]) if messages else None
    if query is None:
        return None
    needle_ask = "write a " + query["rest"]
    offsets = [0]
    for message in messages:
        offsets.append(offsets[-1] + len(message["content"]))
    writings = []
    for i in range(2, len(messages) - 1):
        if messages[i]["role"] != "assistant" or messages[i - 1]["role"] != "user":
            continue
        ask = messages[i - 1]["content"]
        parsed = ASK_PATTERN.match(ask)
        form, entity = (parsed["format"], parsed["entity"]) if parsed else ("", ask)
        text = messages[i]["content"]
        writings.append(Writing(index=i - 1, text=text, ask=ask, format=form, entity=entity, offset=offsets[i - 1]))
    return Transcript(
        writings=tuple(writings),
        needles=tuple(k for k, w in enumerate(writings) if w.ask == needle_ask),
        target=int(query["ordinal"]),
        prefix=random_string,
        length=offsets[-1],
        query=messages[-1]["content"],
    )
