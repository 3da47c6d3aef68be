"""`json.dumps`'s text of long strings, byte for byte, at the speed of its ASCII encoder.

With `ensure_ascii=False`, `json.dumps` escapes a string in a C loop that writes one character at
a time, whatever its kind: some 4 ns a character, 12 ms for the 3 MB prompt of a row of the 1M bin.
Its ASCII encoder (`ensure_ascii=True`) writes bytes and runs in under half that. For a string of
ASCII characters other than DEL (which only the ASCII encoder escapes), the two write the same
text: the row digests and request bodies of mrcr-eval hash and send the same bytes as before.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from json.encoder import encode_basestring, encode_basestring_ascii
from typing import Any


def json_string(text: str) -> str:
    """`json.dumps(text, ensure_ascii=False)` of a `str`."""
    if text.isascii() and "\x7f" not in text:  # isascii: a flag of the str; `in`: a memchr
        return encode_basestring_ascii(text)
    return encode_basestring(text)


def compact_object(value: Mapping[str, Any]) -> str:
    """`json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)` of a dict,
    made by `json_string` when its keys and values are all `str` (a chat message)."""
    parts = []
    for key, field in value.items():
        if type(key) is not str or type(field) is not str:
            return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        parts.append(f"{_key(key)}:{json_string(field)}")
    return "{" + ",".join(parts) + "}"


@lru_cache(maxsize=256)
def _key(key: str) -> str:
    """A key's text: a chat's few keys ("role", "content"), made once, not for each of thousands of messages."""
    return json_string(key)


__all__ = ["compact_object", "json_string"]
