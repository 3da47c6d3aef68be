"""Why a reply scored what it did: the per-row failure analysis, recipe-neutral.

A recipe reads a row into a `Transcript`: its writings in order (the text, the ask that
requested it with its format and entity, and how many characters of the conversation come
before that ask), which of them are the needles, and the ordinal the final query asks for.
`analyse_reply` then says, from the transcript and the reply alone (no model, no network):

* `prefix`: `ok` (the reply starts with the random string / hash), `late` (it appears later) or
  `missing`, as the recipe's answer form (`EvalRecipe.answer_form`) splits the reply into its
  prefix and its body (`SplitReply`; the default form is `split_prefix`: prefix + writing);
* `returned`: which writing of the conversation the reply (after the prefix) is, found as the
  writing with the highest `difflib.SequenceMatcher(None, reply, writing).ratio()` (the official
  grade's ratio, in the same orientation): `target`, `other_needle` (`returned_ordinal` says
  which), `distractor` (a writing of another ask: `returned_index` says where, `same_format` /
  `same_entity` whether its ask shares the needle's format or entity), `not_in_context` when no
  writing reaches `MATCH_THRESHOLD`, or `empty` when nothing follows the prefix;
* `target_depth` / `returned_depth`: the share of the conversation's characters before the
  target needle's ask / the matched writing's ask (characters, not tokens: the analysis needs no
  tokenizer and characters track tokens closely in this English text);
* `truncated`: the server stopped the reply at its length limit (`finish_reason` "length").

Speed: a 1M-token row holds thousands of writings, too many to compare with difflib each. The
candidates are the needles and the writings that contain one of a few exact fragments of the
reply (`str.__contains__`, in C); the ratio runs on those alone, difflib's cheap bounds first (the
ratio itself from `mrcr_gen._matcher`: difflib's number, several times faster). A reply that
paraphrases a distractor so much that no 32-character fragment survives is compared with the
needles only and, below the threshold, is `not_in_context`.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple

from pydantic import BaseModel, ConfigDict

from .._matcher import ratio as fast_ratio

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
    match_ratio: float  # ratio of the reply after the prefix against the best-matching writing
    target_depth: float | None  # share of characters before the target needle's ask
    returned_depth: float | None = None  # share of characters before the matched writing's ask
    truncated: bool


class SplitReply(NamedTuple):
    """A reply as its recipe's answer form reads it: where its prefix was, and the writing it returned."""

    prefix: Prefix
    body: str  # what the analysis compares with the writings ("" when nothing was returned)


def split_prefix(reply: str, prefix: str) -> SplitReply:
    """A reply of the MRCR form, prefix + writing: `ok` with the text after the prefix, `late` with
    the text after its first occurrence further on, else `missing` with the whole reply."""
    if prefix and reply.startswith(prefix):
        return SplitReply("ok", reply[len(prefix) :])
    at = reply.find(prefix) if prefix else -1
    if at > 0:
        return SplitReply("late", reply[at + len(prefix) :])
    return SplitReply("missing", reply)


def _fragments(body: str) -> list[str]:
    """A few exact pieces of the reply, spread over it, to find the writings it was copied from."""
    if len(body) <= FRAGMENT_CHARS:
        return [body] if len(body.strip()) >= FRAGMENT_CHARS // 2 else []
    last = len(body) - FRAGMENT_CHARS
    starts = sorted({round(last * k / (FRAGMENTS - 1)) for k in range(FRAGMENTS)})
    return [body[s : s + FRAGMENT_CHARS] for s in starts]


def _candidates(body: str, transcript: Transcript) -> list[int]:
    """Positions in `transcript.writings` worth a difflib comparison: the target first, the other
    needles, then the writings holding the most fragments of the reply."""
    needles = list(transcript.needles)
    target = needles[transcript.target - 1] if 0 < transcript.target <= len(needles) else None
    ordered = ([target] if target is not None else []) + [n for n in needles if n != target]
    fragments = _fragments(body)
    if fragments:
        hits = []
        chosen = set(ordered)
        for position, writing in enumerate(transcript.writings):
            if position in chosen:
                continue
            found = sum(1 for fragment in fragments if fragment in writing.text)
            if found:
                hits.append((-found, position))
        ordered += [position for _, position in sorted(hits)[:MAX_CANDIDATES]]
    return ordered


def best_match(body: str, transcript: Transcript) -> tuple[int | None, float]:
    """(position in `transcript.writings`, ratio) of the writing the reply body matches best;
    ties go to the earlier candidate (the target before the other needles before distractors)."""
    best: int | None = None
    best_ratio = 0.0
    for position in _candidates(body, transcript):
        matcher = difflib.SequenceMatcher(None, body, transcript.writings[position].text)
        if best is not None and (matcher.real_quick_ratio() <= best_ratio or matcher.quick_ratio() <= best_ratio):
            continue  # cannot beat the best so far
        ratio = fast_ratio(body, transcript.writings[position].text)  # = matcher.ratio(), faster
        if best is None or ratio > best_ratio:
            best, best_ratio = position, ratio
    return best, best_ratio


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


def analyse_split(reply: SplitReply, transcript: Transcript, finish_reason: str | None = None) -> RowAnalysis:
    """The analysis of a reply its recipe's answer form has split (see the module docstring)."""
    body = reply.body
    needles = transcript.needles
    returned: Returned = "empty"
    ratio = 0.0
    ordinal = index = same_format = same_entity = returned_depth = None
    if body.strip():
        position, ratio = best_match(body, transcript)
        ratio = round(ratio, 4)
        if position is None or ratio < MATCH_THRESHOLD:
            returned = "not_in_context"
        else:
            writing = transcript.writings[position]
            index = writing.index
            returned_depth = round(writing.offset / transcript.length, 4) if transcript.length > 0 else None
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
        match_ratio=ratio,
        target_depth=target_depth(transcript),
        returned_depth=returned_depth,
        truncated=finish_reason == "length",
    )
