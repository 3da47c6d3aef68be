"""Recipe-neutral text rules the row checks of every recipe share: an ask that equals the needle ask
but for case, whitespace or trailing punctuation (an error), or up to other punctuation (a warning);
the needle ask standing as a line of some other text (a worked example, a writing), where a model
may count it as one more occurrence; needle writings as good as the target (AMBIGUOUS_SCORE); and
text that UTF-8 cannot encode."""

from __future__ import annotations

import re
from functools import lru_cache

from .._models import normalize_ask

#: A wrong needle writing that scores at least this against the target makes the ground truth ambiguous.
AMBIGUOUS_SCORE = 0.9
#: Speaker labels a line of a transcript may start with ("User: write a poem about tapirs").
SPEAKERS = ("user", "human", "assistant", "model")
_SEPARATORS = r"(?:[^\w\n]|_)*"  # punctuation and spaces, never a line break
#: Python strings hold every code point; only the surrogates (U+D800..U+DFFF) have no UTF-8 encoding.
_SURROGATE = re.compile("[\ud800-\udfff]")


def loose_ask(text: str) -> str:
    """An ask with its case and whitespace normalised and its trailing punctuation removed."""
    return re.sub(r"(?:[^\w\s]|_|\s)+$", "", " ".join(text.casefold().split()))


def is_loose_needle_ask(text: str, ask: str) -> bool:
    """`text` differs from the needle `ask` only in case, whitespace or trailing punctuation
    (`Write a song about sessions.` for `write a song about sessions`): as its own user turn a model
    is likely to count it as one more needle, so it is an error (`needle_ask_elsewhere`)."""
    return text != ask and len(text) < 4 * len(ask) + 40 and loose_ask(text) == loose_ask(ask)


def is_near_duplicate_ask(text: str, ask: str) -> bool:
    """`text` differs from the needle `ask` but equals it up to case, whitespace or punctuation
    (a long text that happens to normalise alike is a writing, not an ask)."""
    return text != ask and len(text) < 4 * len(ask) + 40 and normalize_ask(text) == normalize_ask(ask)


@lru_cache(maxsize=64)
def ask_line_pattern(ask: str) -> re.Pattern[str]:
    """A line that is `ask` up to case, spaces and punctuation, optionally after a speaker label
    (`User: write a poem about tapirs`, `**Write a Poem About Tapirs.**`): the whole line, so a
    writing that merely mentions the phrase in a sentence does not match."""
    words = re.findall(r"[^\W_]+", ask.lower())
    if not words:
        return re.compile(r"(?!)")  # an ask of punctuation alone is no ask: it matches nothing
    speaker = "(?:" + "|".join(SPEAKERS) + ")"
    body = _SEPARATORS.join(map(re.escape, words))
    return re.compile(rf"^{_SEPARATORS}(?:{speaker}{_SEPARATORS})?{body}{_SEPARATORS}$", re.IGNORECASE | re.MULTILINE)


@lru_cache(maxsize=64)
def _longest_word(ask: str) -> str:
    return max(re.findall(r"[^\W_]+", ask.lower()), key=len, default="")


def has_ask_line(text: str, ask: str, lowered: str | None = None) -> bool:
    """Whether some line of `text` is the ask (see `ask_line_pattern`); `lowered` is `text.lower()`
    when the caller keeps it (a text checked against many asks)."""
    # A plain substring test first: most texts lack the ask's longest word, and the regex is slower.
    lowered = text.lower() if lowered is None else lowered
    return _longest_word(ask) in lowered and ask_line_pattern(ask).search(text) is not None


def unencodable_at(text: str) -> int | None:
    """The offset of the first character UTF-8 cannot encode (a lone surrogate), else None."""
    match = _SURROGATE.search(text)
    return match.start() if match is not None else None


def encodable(text: str) -> str:
    """`text` with every character UTF-8 cannot encode replaced by U+FFFD (so it can be tokenized)."""
    return _SURROGATE.sub("\ufffd", text)
