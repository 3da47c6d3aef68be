"""Assemble MRCR v2 transcripts to an exact token budget, and the rows each transcript offers.

A transcript is one flat string: the few-shot block, then `User: ... Assistant: ...` turns. It
holds several needle keys, each exactly n times (its turns in a fixed order, interleaved at
random with the other keys' turns), and filler turns of keys whose topics no needle key uses,
at uniformly random places. Every (key, ordinal) of the transcript can be a row: the rows of a
transcript share it as their prefix.

Lengths are exact for any tokenizer. Every distinct turn is tokenized once and the counts are
added: exact when the tokenizer splits where a turn starts ("User:" right after a blank line),
as o200k's and every byte-level pre-split does. One row of each transcript is counted whole to
check it (`counts_add_up`); when the tokenizer does not split there (SentencePiece-style
tokenizers that add a prefix space, BPE without a pre-split), the transcript is `measured`: each
row's length is its whole `queries` counted as one text, and each position the count of the text
before it (slower: a few whole counts per row).
"""

from __future__ import annotations

import random
import re
import string
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import cached_property
from typing import Protocol

from ..._budget import AssemblyError, fill_budget, interleave, needle_slots
from ..._models import Writing
from ..._seeding import derived_rng
from ..._tokens import DEFAULT_TOKENIZER, count_tokens, count_tokens_batch, tokenizer_threads
from ._catalog import V2Catalog, V2Key
from ._rows import V2Row
from ._text import HASH_LENGTH, HEADER, TRANSCRIPT_OPEN, example_close, example_open, query_text, turn_text

HASH_ALPHABET = string.ascii_letters + string.digits
# Keys tried for the first one that fits before giving up (short buckets, long formats).
MAX_KEY_MISSES = 16
MAX_ATTEMPTS = 20
#: Bumped whenever the same writer and seed start giving different transcripts, so that a rerun of
#: an older run's command rewrites its files instead of keeping them (see `_generate`): 2, the
#: few-shot block drawn to upstream's 750-800 tokens.
LAYOUT_REVISION = 2
#: The few-shot block's tokens, as upstream's `generate_fewshot_prompt` draws it (TARGET_FEWSHOT_TOKENS
#: 800, at most 50 below), and the draws tried before taking the closest.
FEWSHOT_TOKENS = (750, 800)
FEWSHOT_ATTEMPTS = 128
#: Turns counted by one task of the tokenizer threads (a key's needles, or a part of a filler batch).
COUNTED_TOGETHER = 8
#: Keys whose needle turns are composed ahead of the one being fitted, while its turns are counted.
KEYS_AHEAD = 1


def random_hash(rng: random.Random) -> str:
    return "".join(rng.choice(HASH_ALPHABET) for _ in range(HASH_LENGTH))


#: Where a hash (HASH_LENGTH characters of HASH_ALPHABET) can occur in a text: inside a run of at least as many.
_HASH_RUN = re.compile(f"[{HASH_ALPHABET}]{{{HASH_LENGTH},}}")


def hash_windows(text: str) -> frozenset[str]:
    """Every string of HASH_LENGTH characters of HASH_ALPHABET that occurs in `text`: a hash occurs in
    the text exactly when it is one of these. Runs that long are rare words in a writing, so this is
    one pass over the text instead of one search per hash."""
    return frozenset(
        run[i : i + HASH_LENGTH] for run in _HASH_RUN.findall(text) for i in range(len(run) - HASH_LENGTH + 1)
    )


@dataclass(frozen=True)
class Turn:
    key: V2Key
    variant: int
    text: str  # the whole turn, "User: ...\n\nAssistant: ...\n\n"
    tokens: int
    writing: str  # the assistant's text: a row's answer when the turn is its target
    #: `hash_windows(text)`; no hash crosses into a neighbour: turns start with "User:", end with a blank line.
    windows: frozenset[str]


@dataclass
class Transcript:
    """A built transcript; rows are made from it one at a time (`row`)."""

    fewshot: str
    fewshot_tokens: int
    turns: list[Turn]
    n_needles: int
    hashes: dict[V2Key, str]
    query_tokens: dict[tuple[V2Key, int], int]
    target: int
    tokenizer: str = DEFAULT_TOKENIZER
    #: Lengths and positions counted on the whole text (the tokenizer does not split at turns).
    measured: bool = False
    _whole: dict[tuple[V2Key, int], int] = field(default_factory=dict, repr=False)
    _prefix: dict[int, int] = field(default_factory=dict, repr=False)

    @cached_property
    def text(self) -> str:
        return self.fewshot + "".join(t.text for t in self.turns)

    @cached_property
    def tokens(self) -> int:
        return self.fewshot_tokens + sum(t.tokens for t in self.turns)

    @cached_property
    def needle_keys(self) -> list[V2Key]:
        return list(self.hashes)

    @cached_property
    def _starts(self) -> list[int]:
        starts, at = [], self.fewshot_tokens
        for turn in self.turns:
            starts.append(at)
            at += turn.tokens
        return starts

    @cached_property
    def _char_starts(self) -> list[int]:
        """Character offset of every turn, and of the transcript's end."""
        starts, at = [], len(self.fewshot)
        for turn in self.turns:
            starts.append(at)
            at += len(turn.text)
        return [*starts, at]

    def _token_offset(self, turn_index: int) -> int:
        """Tokens of the text before turn `turn_index` (the end of the transcript for len(turns))."""
        if not self.measured:
            return self._starts[turn_index] if turn_index < len(self.turns) else self.tokens
        char = self._char_starts[turn_index]
        if char not in self._prefix:
            self._prefix[char] = count_tokens(self.text[:char], self.tokenizer)
        return self._prefix[char]

    @cached_property
    def turn_indices(self) -> dict[V2Key, list[int]]:
        found: dict[V2Key, list[int]] = {key: [] for key in self.hashes}
        for i, turn in enumerate(self.turns):
            if turn.key in found:
                found[turn.key].append(i)
        return found

    def pairs(self) -> list[tuple[V2Key, int]]:
        """Every (key, ordinal) this transcript can be asked about."""
        return [(key, k) for key in self.needle_keys for k in range(1, self.n_needles + 1)]

    def parts_len(self, key: V2Key, ordinal: int) -> int:
        """The row's length as the few-shot block, the turns and the query counted apart, added."""
        return self.tokens + self.query_tokens[(key, ordinal)]

    def context_len(self, key: V2Key, ordinal: int) -> int:
        if not self.measured:
            return self.parts_len(key, ordinal)
        if (key, ordinal) not in self._whole:
            self._whole[(key, ordinal)] = count_tokens(self.text + self.query(key, ordinal), self.tokenizer)
        return self._whole[(key, ordinal)]

    def query(self, key: V2Key, ordinal: int) -> str:
        return query_text(self.hashes[key], ordinal, *key)

    def row(self, key: V2Key, ordinal: int) -> V2Row:
        indices = self.turn_indices[key]
        spans = tuple((self._token_offset(i), self._token_offset(i + 1)) for i in indices)
        target = self.turns[indices[ordinal - 1]]
        view_ops = self.query(key, ordinal)
        return V2Row(
            queries=self.text + view_ops,
            answer=self.hashes[key] + target.writing,
            context_len=self.context_len(key, ordinal),
            # Counted here, for the few writings that are answers, not for every writing drawn.
            answer_token_count=count_tokens(target.writing, self.tokenizer),
            view_ops=view_ops,
            num_relevant=self.n_needles,
            answer_context_position=spans[ordinal - 1],
            index_positions_of_seeds=tuple(indices),
            relevant_context_positions=spans,
        )


class V2Writer(Protocol):
    """What the assembler needs of a v2 writer (offline or LLM)."""

    variants_per_key: int

    def writings(self, keys: Sequence[tuple[V2Key, int]]) -> list[Writing]: ...


def writing_texts(writer: V2Writer, keys: Sequence[tuple[V2Key, int]]) -> list[str]:
    """The writings' texts; uncounted when the writer can (`MemoizedWriter.texts`): the assembler
    counts each one inside its turn, and a row counts its answer."""
    texts = getattr(writer, "texts", None)
    return texts(keys) if texts is not None else [w.text for w in writer.writings(keys)]


@dataclass
class V2Assembler:
    """Builds transcripts from a v2 writer; reuse one instance so token counts are shared."""

    writer: V2Writer
    catalog: V2Catalog
    tokenizer: str = DEFAULT_TOKENIZER
    _turns: dict[tuple[V2Key, int], Turn] = field(default_factory=dict)
    #: Turns composed whose counts a tokenizer thread is counting: (writing, text, counts, index in them).
    _counting: dict[tuple[V2Key, int], tuple[str, str, Future[list[int]], int]] = field(default_factory=dict)

    @property
    def variants(self) -> int:
        return self.writer.variants_per_key

    def compose(self, keys: Sequence[tuple[V2Key, int]]) -> None:
        """Compose the writings of `keys` not yet turns, and count them on the tokenizer threads,
        COUNTED_TOGETHER at a time: this thread composes the next ones meanwhile (see `_attempt`)."""
        missing = list(dict.fromkeys(k for k in keys if k not in self._turns and k not in self._counting))
        for start in range(0, len(missing), COUNTED_TOGETHER):
            chunk = missing[start : start + COUNTED_TOGETHER]
            writings = writing_texts(self.writer, chunk)
            texts = [turn_text(key.ask, w) for (key, _), w in zip(chunk, writings, strict=True)]
            counts = tokenizer_threads().submit(count_tokens_batch, texts, 1, self.tokenizer)
            for index, (key, writing, text) in enumerate(zip(chunk, writings, texts, strict=True)):
                self._counting[key] = (writing, text, counts, index)

    def turns(self, keys: Sequence[tuple[V2Key, int]]) -> list[Turn]:
        self.compose(keys)
        for key in keys:
            if key in self._counting:
                writing, text, counts, index = self._counting.pop(key)
                self._turns[key] = Turn(key[0], key[1], text, counts.result()[index], writing, hash_windows(text))
        return [self._turns[k] for k in keys]

    def _compose_ahead(self, rng: random.Random, upcoming: Sequence[V2Key], n_needles: int) -> None:
        """Compose the needle turns of the `upcoming` keys while the tokenizer threads count the
        current key's: their variants as a copy of `rng` draws them, each after the hash of the key
        before it (a key passed over, or a hash drawn again, makes a guess wrong: that costs a
        composition, never a change, as a writing depends on its key and variant alone)."""
        ahead = random.Random()
        ahead.setstate(rng.getstate())
        for key in upcoming:
            random_hash(ahead)
            self.compose([(key, v) for v in ahead.sample(range(self.variants), n_needles)])

    def fewshot(self, rng: random.Random) -> tuple[str, int]:
        """The few-shot block and its tokens: drawn again until it takes FEWSHOT_TOKENS (as upstream,
        which aims at 750-800 tokens), else the draw closest to them after FEWSHOT_ATTEMPTS (writings
        too long or short for any draw to fit, as another writer or tokenizer may give)."""
        lowest, highest = FEWSHOT_TOKENS
        best: tuple[int, str, int] | None = None
        for _ in range(FEWSHOT_ATTEMPTS):
            text = self._fewshot_draw(rng)
            tokens = count_tokens(text, self.tokenizer)
            miss = max(lowest - tokens, tokens - highest, 0)
            if best is None or miss < best[0]:
                best = (miss, text, tokens)
            if not miss:
                break
        assert best is not None
        return best[1], best[2]

    def _fewshot_draw(self, rng: random.Random) -> str:
        """Two worked examples: the first of one key among two, the second of one key asked twice."""
        first, second, third = rng.sample(self.catalog.fewshot_keys, 3)
        a, b = self.writer.writings([(first, rng.randrange(self.variants)), (second, rng.randrange(self.variants))])
        c1, c2 = self.writer.writings([(third, v) for v in rng.sample(range(self.variants), 2)])
        examples = []
        for pairs, ordinal, target_key, target in (
            ([(first, a), (second, b)], 1, first, a),
            ([(third, c1), (third, c2)], 2, third, c2),
        ):
            secret = random_hash(rng)
            turns = "".join(turn_text(key.ask, w.text) for key, w in pairs)
            examples.append(turns + query_text(secret, ordinal, *target_key) + " " + secret + target.text)
        return (
            HEADER
            + "\n"
            + example_open(1)
            + examples[0]
            + example_close(1)
            + example_open(2)
            + examples[1]
            + example_close(2)
            + TRANSCRIPT_OPEN
        )

    def build(self, *, n_needles: int, target: int, lowest: int, seed: int) -> Transcript:
        """A transcript whose rows all have `lowest <= context_len <= target` (as many of them as
        the fill allows: the caller keeps the rows inside its bucket)."""
        if not 1 <= n_needles <= min(8, self.variants):
            raise AssemblyError(f"MRCR v2 takes 1 to {min(8, self.variants)} needles, got {n_needles}")
        closest = None
        for attempt in range(MAX_ATTEMPTS):
            outcome = self._attempt(n_needles, target, lowest, (seed, attempt))
            if isinstance(outcome, Transcript):
                return outcome
            if outcome is not None:
                closest = outcome if closest is None else min(closest, outcome)
        if closest is not None:
            raise AssemblyError(
                f"cannot fit {n_needles} needles of one key into {target} tokens: the few-shot block, "
                f"one key's turns and the query alone take at least {closest}"
            )
        raise AssemblyError(f"cannot fill a transcript to {lowest}..{target} tokens with {n_needles} needles")

    def _attempt(self, n_needles: int, target: int, lowest: int, seed: tuple) -> Transcript | int | None:
        rng = derived_rng("mrcr-v2 transcript", *seed)
        fewshot, fewshot_tokens = self.fewshot(rng)
        budget = target - fewshot_tokens

        keys = list(self.catalog.needle_keys)
        rng.shuffle(keys)
        chosen: dict[V2Key, list[Turn]] = {}
        hashes: dict[V2Key, str] = {}
        query_tokens: dict[tuple[V2Key, int], int] = {}
        used = longest_query = misses = 0
        smallest_need = None
        for at, key in enumerate(keys):
            variants = rng.sample(range(self.variants), n_needles)
            self.compose([(key, v) for v in variants])
            self._compose_ahead(rng, keys[at + 1 : at + 1 + KEYS_AHEAD], n_needles)
            turns = self.turns([(key, v) for v in variants])
            if len({t.writing for t in turns}) < n_needles:
                continue  # the writer repeated itself for this key
            secret = random_hash(rng)
            while secret in hashes.values():
                secret = random_hash(rng)
            queries = [query_text(secret, k, *key) for k in range(1, n_needles + 1)]
            counts = count_tokens_batch(queries, num_threads=1, tokenizer=self.tokenizer)  # too short to share
            cost = sum(t.tokens for t in turns)
            need = used + cost + max(longest_query, *counts)
            if need > budget:
                smallest_need = need if smallest_need is None else min(smallest_need, need)
                if chosen:
                    break  # as upstream: keys go in until one does not fit; filler takes the rest
                misses += 1
                if misses >= MAX_KEY_MISSES:
                    break
                continue
            chosen[key], hashes[key] = turns, secret
            query_tokens.update({(key, k): n for k, n in enumerate(counts, start=1)})
            used += cost
            longest_query = max(longest_query, *counts)
        if not chosen:
            return fewshot_tokens + (smallest_need or 0)

        filler = self._fill(random.Random(rng.getrandbits(64)), budget - used - longest_query)
        # Needle turns: each key's in its own order, keys interleaved at random; filler anywhere.
        queues = {key: iter(turns) for key, turns in chosen.items()}
        labels = [key for key, turns in chosen.items() for _ in turns]
        rng.shuffle(labels)
        needles = [next(queues[key]) for key in labels]
        turns = interleave(needles, filler, needle_slots(rng, len(needles) + len(filler), len(needles)))

        transcript = Transcript(
            fewshot=fewshot,
            fewshot_tokens=fewshot_tokens,
            turns=turns,
            n_needles=n_needles,
            hashes=hashes,
            query_tokens=query_tokens,
            target=target,
            tokenizer=self.tokenizer,
        )
        secrets = frozenset(hashes.values())
        if not all(secrets.isdisjoint(windows) for windows in (hash_windows(fewshot), *(t.windows for t in turns))):
            return None  # vanishingly rare: a hash that occurs in the text; draw again
        if min(transcript.parts_len(*p) for p in transcript.pairs()) < lowest:
            return None
        return transcript

    def _fill(self, rng: random.Random, budget: int) -> list[Turn]:
        """Filler turns drawn uniformly over (filler key, variant), adding up to at most `budget`."""
        keys = self.catalog.filler_keys
        return fill_budget(
            budget,
            lambda left: self.turns(
                [(rng.choice(keys), rng.randrange(self.variants)) for _ in range(max(8, left // 500))]
            ),
        )


def splits_at_turns(tokenizer: str) -> bool:
    """Whether `tokenizer` is known to split wherever a line starts with a letter after a line
    break, as every seam of a transcript does (a blank line, then "User:"): o200k's pre-tokenizer
    never joins a line break to the letter after it (the pieces that can hold a letter start at a
    letter or at one character that is not a line break, letter or digit), and its BPE works within
    pieces, so the parts' counts always add up to the whole's. Nothing is known of others."""
    return tokenizer == DEFAULT_TOKENIZER


def counts_add_up(transcript: Transcript) -> bool:
    """Whether one row counted whole equals the added counts of the few-shot block, every turn and
    its query: the tokenizer splits at each of those seams for this transcript. Counted only for a
    tokenizer not known to split there (`splits_at_turns`): o200k's rows are not counted twice."""
    if splits_at_turns(transcript.tokenizer):
        return True
    key, ordinal = transcript.pairs()[0]
    return count_tokens(transcript.text + transcript.query(key, ordinal), transcript.tokenizer) == transcript.parts_len(
        key, ordinal
    )
