"""The shared test chat server (tests/support/chat_server.py) with a policy that writes.

`writer_policy` answers a plain ask (`write a {format} about {entity}`) with varied text about
it, around a hundred o200k tokens long, different on every request.
"""

from __future__ import annotations

import random

WORDS = ["river", "lantern", "quiet", "morning", "harbor", "copper", "meadow", "signal", "thunder", "velvet", "orchard", "compass", "ember", "glacier", "whisper", "canvas", "marble", "horizon", "saffron", "timber", "echo", "willow", "anchor", "prism"]


def writer_policy(messages: list, request_json: dict) -> str:
    ask = messages[-1]["content"]
    topic = ask.removeprefix("write a ")
    rng = random.Random()
    lines = [f"Here is a {topic}:", ""]
    for _ in range(rng.randint(6, 14)):
        lines.append(" ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 12))).capitalize() + ".")
    return "\n".join(lines)
