"""`mrcr_gen._json_text` writes exactly `json.dumps`'s text, and the row digests and request
bodies made with it are those of the plain definitions (issue 36: same digests, same bytes)."""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from mrcr_gen._json_text import compact_object, json_string
from mrcr_gen.eval._chat import row_digest

#: ASCII (the fast path) with its edge cases: quotes, backslashes, control characters, DEL; and
#: now and then a character past ASCII (the other path).
_ascii = st.text(st.characters(max_codepoint=0x7F))
_texts = _ascii | st.text() | st.builds(lambda a, b: a + b, _ascii, st.text(max_size=2))


@given(_texts)
@example("\x7f")
@example('say "hi" \\ \n\t\x00\x1f~')
@example("caf\u00e9 \u2028 \ud83d\ude00")
def test_json_string_is_json_dumps(text):
    assert json_string(text) == json.dumps(text, ensure_ascii=False)


_values = _texts | st.none() | st.integers() | st.lists(_texts, max_size=2)


@given(st.dictionaries(_texts, _values, max_size=4))
@example({"role": "user", "content": "a \x7f b"})
@example({})
def test_compact_object_is_compact_json_dumps(value):
    assert compact_object(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


@given(_texts | st.none() | st.integers(), _texts | st.none(), _texts)
@example('[{"role": "user", "content": "x\\n\\"y\\""}]', "abc\x7f", "abc")
def test_row_digest_is_the_sha256_of_the_plain_json(prompt, answer, prefix):
    plain = json.dumps([prompt, answer, prefix], ensure_ascii=False)
    try:
        expected = hashlib.sha256(plain.encode("utf-8")).hexdigest()
    except UnicodeEncodeError:  # a lone surrogate: neither definition can hash it
        with pytest.raises(UnicodeEncodeError):
            row_digest(prompt, answer, prefix)
        return
    assert row_digest(prompt, answer, prefix) == expected
