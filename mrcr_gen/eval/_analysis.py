"""Why a reply scored what it did: the per-row failure analysis, recipe-neutral.

A recipe reads a row into a `Transcript`: its writings in order (the text, the ask that
requested it with its format and entity, and how many characters of the conversation come
before that ask), which of them are the needles, and the ordinal the final query asks for.
`analyse_reply` then says, from the transcript and the reply alone (no model, no network):

* `prefix`: `ok` (the reply starts with the random string / hash), `late` (it appears later) or
  `missing`, as the recipe's answer form (`EvalRecipe.answer_form`) splits the reply into its
  prefix and its body (`SplitReply`; the default form is `split_prefix`: prefix + writing);
* `returned`: which writing of the conversation the reply (after the prefix) is: the writing
  most `similar` to it (`target`, `other_needle` (`returned_ordinal` says which), `distractor` (a
  writing of another ask: `returned_index` says where, `same_format` / `same_entity` whether its
  ask shares the needle's format or entity), `not_in_context` when no writing reaches
  `MATCH_THRESHOLD`, or `empty` when nothing follows the prefix. The similarity is NOT the
  official grade's difflib ratio (whose autojunk heuristic makes one inserted line, a repeated
  copy or a change of case look unrelated): it compares casefolded words with autojunk off, and
  also measures how much of the writing the reply contains (`containment`), so a copy wrapped in
  chatter, repeated, or in upper case still finds its writing. `repeated` flags a reply holding the
  writing more than once, `case_changed` one that matches only once case is ignored. A `late`
  prefix: the text after it is analysed, and the text before it when that matches better (a reply
  with its prefix at the end). The official score is the grader's, untouched;
* `target_depth` / `returned_depth`: the share of the conversation's characters before the
  target needle's ask / the matched writing's ask (characters, not tokens: the analysis needs no
  tokenizer and characters track tokens closely in this English text);
* `truncated`: the server stopped the reply at its length limit (`finish_reason` "length").

Speed: a 1M-token row holds thousands of writings, too many to compare with difflib each. The
candidates are the needles and the writings that contain one of a few exact fragments of the
reply (`str.__contains__`, in C; casefolded when none holds one as written and the reply is
cased as no writing is: mostly capitals, or none); the word comparison runs on those alone. A
reply that paraphrases a distractor so much that no 32-character fragment survives is compared
with the needles only and, below the threshold, is `not_in_context`.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Literal, NamedTuple

from pydantic import BaseModel, ConfigDict

#: A reply matches a writing when their ratio reaches this: writings of the same format and
#: entity written apart score about 0.2-0.4 against each other, a copy with small edits above 0.8.
MATCH_THRESHOLD = 0.5
FRAGMENT_CHARS = 32
FRAGMENTS = 8
MAX_CANDIDATES = 16

#: `ok`: the reply starts with the prefix; `late`: it holds it further on; `missing`: it does not.
Prefix = Literal["ok", "late", "missing"]
Returned = Literal["target", "other_needle", "distractor", "not_in_context", "empty"]


@dataclass(frozen=True)
class Writing:
    """One writing of a conversation and the ask that requested it."""

    index: int  # where the recipe's rows hold it: its ask's message index (openai/mrcr), turn index (MRCR v2)
    text: str
    ask: str
    format: str
    entity: str
    offset: int  # characters of the conversation before its ask


@dataclass(frozen=True)
class Transcript:
    """What the analysis needs of a row."""

    writings: tuple[Writing, ...]
    needles: tuple[int, ...]  # positions in `writings` of the needle writings (asked as the query's ask)
    target: int  # 1-based ordinal the final query asks for
    prefix: str  # the random string / hash the reply must start with
    length: int  # characters of the whole conversation
    query: str = ""  # the final query, as the row asks it

    @cached_property
    def folded(self) -> tuple[str, ...]:
        """The writings' texts casefolded, for the fragment search (computed once per row)."""
        return tuple(writing.text.casefold() for writing in self.writings)


# "write a {format} about {entity}": formats never hold " about ", entities may.
ASK_PATTERN = re.compile(r"write an? (?P<format>.+?) about (?P<entity>.+)\Z", re.DOTALL)


def chat_transcript(
    messages: Sequence[dict], *, needle_ask: str, target: int, prefix: str, query: str | None = None
) -> Transcript:
    """A chat's transcript: every assistant writing that follows a user ask (before the final query),
    indexed by its ask's message index, with the writings of `needle_ask` as its needles."""
    offsets = [0]
    for message in messages:
        offsets.append(offsets[-1] + len(message["content"]))
    writings = []
    for i in range(1, len(messages) - 1):
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
        target=target,
        prefix=prefix,
        length=offsets[-1],
        query=messages[-1]["content"] if query is None else query,
    )


class RowAnalysis(BaseModel):
    """The analysis of one reply, stored per row in `results.jsonl` as `analysis`."""

    model_config = ConfigDict(frozen=True)

    prefix: Prefix
    returned: Returned
    target_ordinal: int  # 1-based ordinal the final query asked for
    returned_ordinal: int | None = None  # 1-based, when a needle (the target included) was returned
    returned_index: int | None = None  # the writing's message / turn index when one matched
    same_format: bool | None = None  # a distractor's ask shares the needle's format
    same_entity: bool | None = None  # a distractor's ask shares the needle's entity / topic
    match_ratio: float  # `similarity` to the best-matching writing (not the grade); 0 when none could reach 0.5
    target_depth: float | None  # share of characters before the target needle's ask
    returned_depth: float | None = None  # share of characters before the matched writing's ask
    truncated: bool
    repeated: bool = False  # the reply holds the matched writing more than once
    case_changed: bool = False  # the reply matches its writing only once case is ignored
    before_prefix: bool = False  # a late prefix: the writing was found before it, not after


class SplitReply(NamedTuple):
    """A reply as its recipe's answer form reads it: where its prefix was, and the writing it returned."""

    prefix: Prefix
    body: str  # what the analysis compares with the writings ("" when nothing was returned)
    before: str = ""  # a late prefix: the text before it (a reply may write its prefix last)


def split_prefix(reply: str, prefix: str) -> SplitReply:
    """A reply of the MRCR form, prefix + writing: `ok` with the text after the prefix, `late` with
    the text after its first occurrence further on (and the text before it), else `missing` with
    the whole reply."""
    if prefix and reply.startswith(prefix):
        return SplitReply("ok", reply[len(prefix) :])
    at = reply.find(prefix) if prefix else -1
    if at > 0:
        return SplitReply("late", reply[at + len(prefix) :], reply[:at])
    return SplitReply("missing", reply)


WORD = re.compile(r"\w+")
#: A run of at least this many words in common counts towards `containment` (shorter runs of
#: common words occur between any two writings).
CONTAINED_RUN = 4
#: `case_changed`: the casefolded similarity beats the case-sensitive one by at least this much.
CASE_GAIN = 0.2
REPEAT_HEAD = 12  # words of a writing's opening looked for more than once (`repeated`)
BODY_WORDS_PER_WRITING = 4  # a reply's words compared with a writing: at most this many times its length


def words(text: str, fold: bool = True) -> list[str]:
    return WORD.findall(text.casefold() if fold else text)


def similarity(body: list[str], writing: list[str]) -> float:
    """How well a reply's words match a writing's: the larger of their word ratio (difflib's
    2M/T on words, autojunk off) and the share of the writing's words found in runs of at least
    `CONTAINED_RUN` words of the reply (1 for an exact copy wrapped in chatter or repeated)."""
    if not body or not writing:
        return 0.0
    # The writing first: difflib indexes the second sequence, and a long repetitive reply then
    # costs one pass per writing word.
    blocks = difflib.SequenceMatcher(None, writing, body, autojunk=False).get_matching_blocks()
    matched = sum(block.size for block in blocks)
    contained = sum(block.size for block in blocks if block.size >= CONTAINED_RUN)
    return max(2 * matched / (len(body) + len(writing)), contained / len(writing))


def _upper_bound(body: Counter, body_length: int, writing: list[str]) -> float:
    """A bound `similarity` cannot exceed: the words the two share, as a multiset."""
    shared = sum((body & Counter(writing)).values())
    return max(2 * shared / (body_length + len(writing)), shared / len(writing)) if writing else 0.0


def _fragments(body: str) -> list[str]:
    """A few exact pieces of the reply, spread over it, to find the writings it was copied from."""
    if len(body) <= FRAGMENT_CHARS:
        return [body] if len(body.strip()) >= FRAGMENT_CHARS // 2 else []
    last = len(body) - FRAGMENT_CHARS
    starts = sorted({round(last * k / (FRAGMENTS - 1)) for k in range(FRAGMENTS)})
    return [body[s : s + FRAGMENT_CHARS] for s in starts]


def _candidates(body: str, transcript: Transcript) -> list[int]:
    """Positions in `transcript.writings` worth a comparison: the target first, the other
    needles, then the writings holding the most fragments of the reply (casefolded when none
    holds one as written: a reply in another case)."""
    needles = list(transcript.needles)
    target = needles[transcript.target - 1] if 0 < transcript.target <= len(needles) else None
    ordered = ([target] if target is not None else []) + [n for n in needles if n != target]
    chosen = set(ordered)
    hits = _holding(_fragments(body), [w.text for w in transcript.writings], chosen)
    if not hits and _case_changed(body):
        hits = _holding(_fragments(body.casefold()), transcript.folded, chosen)
    return ordered + [position for _, position in sorted(hits)[:MAX_CANDIDATES]]


def _case_changed(text: str) -> bool:
    """Whether a text's letters are cased as no writing is (mostly capitals, or no capital at all):
    only then are its fragments looked for casefolded, which costs a pass over the conversation."""
    letters = [c for c in text if c.isalpha()]
    if len(letters) < FRAGMENT_CHARS:
        return False
    upper = sum(1 for c in letters if c.isupper()) / len(letters)
    return upper > 0.3 or upper == 0


def _holding(fragments: list[str], texts: Sequence[str], skip: set[int]) -> list[tuple[int, int]]:
    """(-fragments found, position) of each text (not in `skip`) holding one of the fragments."""
    hits = []
    if fragments:
        for position, text in enumerate(texts):
            if position not in skip:
                found = sum(1 for fragment in fragments if fragment in text)
                if found:
                    hits.append((-found, position))
    return hits


def best_match(body: str, transcript: Transcript) -> tuple[int | None, float]:
    """(position in `transcript.writings`, `similarity`) of the writing the reply body matches
    best; ties go to the earlier candidate (the target before the other needles before
    distractors). A writing the reply holds whole (casefolded) scores 1 without a comparison; one
    whose shared words cannot reach `MATCH_THRESHOLD`, or beat the best so far, is not compared
    (None when no writing can reach it); only the first `BODY_WORDS_PER_WRITING` times the
    writing's length of a long reply is compared (a looping reply must not cost seconds)."""
    best: int | None = None
    best_score = 0.0
    body_words = words(body)
    bag = Counter(body_words)
    folded = body.casefold()
    for position in _candidates(body, transcript):
        text = transcript.writings[position].text
        writing = words(text)
        if text.strip() and text.strip().casefold() in folded:
            score = 1.0
        elif _upper_bound(bag, len(body_words), writing) < max(best_score, MATCH_THRESHOLD):
            continue  # cannot match, or cannot beat the best so far
        else:
            score = similarity(body_words[: BODY_WORDS_PER_WRITING * max(len(writing), 100)], writing)
        if best is None or score > best_score:
            best, best_score = position, score
    return best, best_score


def _repeated(body: str, writing: str) -> bool:
    """Whether the reply holds the writing's opening words more than once."""
    head, text = words(writing)[:REPEAT_HEAD], words(body)
    if not head:
        return False
    starts = [i for i, word in enumerate(text) if word == head[0] and text[i : i + len(head)] == head]
    return len(starts) > 1


def target_depth(transcript: Transcript) -> float | None:
    """The share of the conversation's characters before the target needle's ask."""
    needles = transcript.needles
    if 0 < transcript.target <= len(needles) and transcript.length > 0:
        return round(transcript.writings[needles[transcript.target - 1]].offset / transcript.length, 4)
    return None


def analyse_reply(reply: str, transcript: Transcript, finish_reason: str | None = None) -> RowAnalysis:
    """The analysis of `reply`, in the default answer form (the prefix glued to the writing), to
    the row `transcript` describes (see the module docstring)."""
    return analyse_split(split_prefix(reply, transcript.prefix), transcript, finish_reason)


def _located(reply: SplitReply, transcript: Transcript) -> tuple[str, int | None, float, bool]:
    """(the text analysed, the matched writing's position, its similarity, whether it came before
    a late prefix): after the prefix, or before a late one when that matches better."""
    body = reply.body
    position, score = best_match(body, transcript) if body.strip() else (None, 0.0)
    if reply.prefix == "late" and reply.before.strip():
        before_position, before_score = best_match(reply.before, transcript)
        if before_score > score:
            return reply.before, before_position, before_score, True
    return body, position, score, False


def analyse_split(reply: SplitReply, transcript: Transcript, finish_reason: str | None = None) -> RowAnalysis:
    """The analysis of a reply its recipe's answer form has split (see the module docstring)."""
    body, position, score, before = _located(reply, transcript)
    needles = transcript.needles
    returned: Returned = "empty" if not body.strip() else "not_in_context"
    ordinal = index = same_format = same_entity = returned_depth = None
    repeated = case_changed = False
    if position is not None and score >= MATCH_THRESHOLD:
        writing = transcript.writings[position]
        index = writing.index
        returned_depth = round(writing.offset / transcript.length, 4) if transcript.length > 0 else None
        repeated = _repeated(body, writing.text)
        case_changed = similarity(words(body, False), words(writing.text, False)) <= score - CASE_GAIN
        if position in needles:
            ordinal = needles.index(position) + 1
            returned = "target" if ordinal == transcript.target else "other_needle"
        else:
            returned = "distractor"
            if needles:
                needle = transcript.writings[needles[0]]
                same_format, same_entity = writing.format == needle.format, writing.entity == needle.entity
    return RowAnalysis(
        prefix=reply.prefix,
        returned=returned,
        target_ordinal=transcript.target,
        returned_ordinal=ordinal,
        returned_index=index,
        same_format=same_format,
        same_entity=same_entity,
        match_ratio=round(score, 4),
        target_depth=target_depth(transcript),
        returned_depth=returned_depth,
        truncated=finish_reason == "length",
        repeated=repeated,
        case_changed=case_changed,
        before_prefix=before,
    )
