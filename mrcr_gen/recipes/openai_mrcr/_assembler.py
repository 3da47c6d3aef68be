"""Assemble one MRCR conversation around n identical needle asks, to an exact token budget.

Token counts come from the writer (each writing tokenized once); assembly only adds them up.
"""

from __future__ import annotations

import json
import operator
import random
import statistics
import string
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from ..._bins import Bin
from ..._budget import AssemblyError, fill_budget, interleave, needle_slots
from ..._models import Ask, Writing, normalize_ask, normalize_writing, ordinal
from ..._seeding import derived_rng
from ..._tokens import DEFAULT_TOKENIZER, count_tokens, count_tokens_batch
from ...writers._base import Writer
from ...writers._memo import OFFLINE_VARIANTS_PER_ASK
from ._models import PREAMBLE_HEADER, QUERY_TEMPLATE, MrcrRow, Sample

RANDOM_STRING_ALPHABET = string.ascii_letters + string.digits


MAX_ATTEMPTS = 50
#: Writings per format, and preambles, that `typical_fixed` measures.
PROBE_WRITINGS = 16
PROBE_PREAMBLES = 8
#: Bumped whenever the same writer and seed start giving different rows, so that a rerun of an
#: older run's command rewrites its files instead of keeping them (see `_generate`).
LAYOUT_REVISION = 3


def tokens_window(tokens: int) -> tuple[int, int]:
    """The totals a `tokens=N` row may have: within 1% of N (64 tokens below 6400), never above."""
    return tokens - max(64, tokens // 100), tokens


def random_string(rng: random.Random) -> str:
    return "".join(rng.choice(RANDOM_STRING_ALPHABET) for _ in range(10))


@dataclass(frozen=True, slots=True)
class _Pair:
    """A user ask and its writing, with everything a row needs of them worked out once. The writing
    is held only in `messages_json`: its text is decoded from there when a row needs it (a needle's
    answer, a preamble's example), which keeps a worker from holding every writing twice."""

    ask: Ask
    tokens: int  # of both messages
    chars: int  # of both messages' contents
    messages_json: str  # both messages as the prompt's JSON holds them
    text_at: int  # where the writing's JSON string starts in `messages_json`

    @classmethod
    def of(cls, ask: Ask, writing: Writing, ask_tokens: int, ask_chars: int, opening: str) -> _Pair:
        """The pair of `ask`, whose text has `ask_chars` characters and `ask_tokens` tokens, and whose
        messages' JSON up to the writing is `opening` (`_opening`, made once per ask)."""
        text = writing.text
        messages = f"{opening}{json.dumps(text)}}}"
        return cls(ask, ask_tokens + writing.n_tokens, ask_chars + len(text), messages, len(opening))

    @property
    def text(self) -> str:
        """The writing's text."""
        return json.loads(self.messages_json[self.text_at : -1])


_pair_tokens, _pair_chars = operator.attrgetter("tokens"), operator.attrgetter("chars")


def _opening(ask_text: str) -> str:
    """An ask's user message and the start of its reply, as the prompt's JSON holds them."""
    return f'{{"role": "user", "content": {json.dumps(ask_text)}}}, {{"role": "assistant", "content": '


@dataclass(frozen=True)
class AskFacts:
    """What a row needs of each ask of a writer, worked out once per process (`ask_facts`): its
    near-duplicate key, tokens, characters, its messages' JSON up to the writing, and its index."""

    keys: tuple[str, ...]
    tokens: tuple[int, ...]
    chars: tuple[int, ...]
    openings: tuple[str, ...]
    index: dict[Ask, int]


@lru_cache(maxsize=4)
def ask_facts(asks: tuple[Ask, ...], tokenizer: str) -> AskFacts:
    """The facts of `asks`, counted by `tokenizer`: a generation's check and every work unit of a
    worker ask for the same catalog's, which a fork server works out once for all its workers
    (`_preload_asks`; 4,380 asks: a few hundredths of a second each time)."""
    texts = [a.text for a in asks]
    return AskFacts(
        keys=tuple(normalize_ask(text) for text in texts),
        tokens=tuple(count_tokens_batch(texts, tokenizer=tokenizer)),
        chars=tuple(len(text) for text in texts),
        openings=tuple(_opening(text) for text in texts),
        index={a: i for i, a in enumerate(asks)},
    )


@dataclass
class _Shortfall:
    fixed: int  # tokens of preamble, needles, query and answer
    total: int | None = None  # tokens reached after filling, when the fill fell short


class Assembler:
    """Builds samples from a writer; reuse one instance so token counts are shared across rows."""

    def __init__(self, writer: Writer, date_added: str, tokenizer: str = DEFAULT_TOKENIZER) -> None:
        self.writer = writer
        self.date_added = date_added
        # Writings arrive counted by the writer; every other text is counted here, so both must agree.
        writer_tokenizer = getattr(writer, "tokenizer", DEFAULT_TOKENIZER)
        if writer_tokenizer != tokenizer:
            raise AssemblyError(
                f"writer {writer.name!r} counts with {writer_tokenizer}, the assembler with {tokenizer}"
            )
        self.tokenizer = tokenizer
        self._asks = list(writer.asks())
        if not self._asks:
            raise AssemblyError(f"writer {writer.name!r} offers no asks")
        # Per-ask facts, computed once: drawing a distractor, or making its pair, is then a few list look-ups.
        facts = ask_facts(tuple(self._asks), tokenizer)
        self._keys, self._ask_token_counts, self._ask_chars = facts.keys, facts.tokens, facts.chars
        self._openings, self._index = facts.openings, facts.index
        self._spaces = [self._variant_space(a) for a in self._asks]
        # A pool keeps flagged replies (refusals, talk about the ask) out of needle slots: it offers
        # fewer needle variants than variants, the flagged ones last (`PoolWriter.needle_variants`).
        self._needle_variants = getattr(writer, "needle_variants", writer.n_variants)
        self._candidates: dict[int, list[Ask]] = {}
        # Rows of a large bin draw thousands of pairs from the same few thousand keys.
        self._pair_cache: dict[tuple[int, int], _Pair] = {}
        # A memoizing writer need not keep what the pairs hold (see `MemoizedWriter.forget`).
        self._forget = getattr(writer, "forget", None)

    # -- drawing -----------------------------------------------------------------------------
    def _variant_space(self, ask: Ask, at_least: int = 1) -> int:
        return min(self.writer.n_variants(ask), max(at_least, OFFLINE_VARIANTS_PER_ASK))

    def _needle_space(self, ask: Ask, n_needles: int) -> int:
        return min(self._needle_variants(ask), max(n_needles, OFFLINE_VARIANTS_PER_ASK))

    def _needle_candidates(self, n_needles: int) -> list[Ask]:
        if n_needles not in self._candidates:
            self._candidates[n_needles] = self._find_needle_candidates(n_needles)
        return self._candidates[n_needles]

    def _find_needle_candidates(self, n_needles: int) -> list[Ask]:
        """Asks that can be the needle ask; an error saying exactly what is missing if none can.

        A needle ask needs n distinct writings, another ask (a different near-duplicate key) to
        draw distractors from, and another ask with 2 distinct writings for the preamble's first
        worked example.
        """
        who = "pool" if self.writer.name == "pool" else f"writer {self.writer.name!r}"
        counts = {a: self.writer.n_variants(a) for a in self._asks}
        needle_counts = {a: self._needle_variants(a) for a in self._asks}
        candidates = [a for a in self._asks if needle_counts[a] >= n_needles]
        if not candidates:
            best = max(self._asks, key=lambda a: needle_counts[a])
            raise AssemblyError(
                f"{who} has no ask with {n_needles} distinct writings (most: {needle_counts[best]} for '{best.text}'"
                + (", refusals and replies about the ask left out)" if needle_counts != counts else ")")
            )
        keys = dict(zip(self._asks, self._keys, strict=True))
        if len(set(keys.values())) < 2:
            raise AssemblyError(f"{who} has only one ask ('{candidates[0].text}'); distractors need other asks")
        with_two = {keys[a] for a in self._asks if counts[a] >= 2}
        usable = [a for a in candidates if len(with_two) > 1 or (with_two and keys[a] not in with_two)]
        if not usable:
            which = "no ask" if not with_two else f"only '{next(a for a in self._asks if counts[a] >= 2).text}'"
            raise AssemblyError(
                f"{who} has {which} with 2 distinct writings besides the needle ask; "
                "the preamble's first worked example needs one"
            )
        return usable

    def _pairs(self, keys: Sequence[tuple[int, int]]) -> list[_Pair]:
        """Pairs for (ask index, variant) keys."""
        cache = self._pair_cache
        try:
            return [cache[key] for key in keys]  # once the first rows drew them, every key is there
        except KeyError:
            pass
        missing = [key for key in dict.fromkeys(keys) if key not in cache]
        asks, counts, chars, openings = self._asks, self._ask_token_counts, self._ask_chars, self._openings
        writer_keys = [(asks[i], v) for i, v in missing]
        writings = self.writer.writings(writer_keys)
        for (i, v), writing in zip(missing, writings, strict=True):
            cache[i, v] = _Pair.of(asks[i], writing, counts[i], chars[i], openings[i])
        if self._forget is not None:
            self._forget(writer_keys)  # the pairs hold them now (see _Pair)
        return [cache[key] for key in keys]

    def _draw_distractors(self, rng: random.Random, needle_key: str, count: int) -> list[_Pair]:
        keys: list[tuple[int, int]] = []
        n_asks, ask_keys, spaces = len(self._asks), self._keys, self._spaces
        while len(keys) < count:
            i = rng.randrange(n_asks)
            if ask_keys[i] != needle_key:
                keys.append((i, rng.randrange(spaces[i])))
        return self._pairs(keys)

    def _preamble(self, rng: random.Random, needle_key: str) -> str:
        """Two worked examples in the real structure, each a tiny MRCR instance of its own."""

        def pick_ask() -> Ask:
            while True:
                ask = rng.choice(self._asks)
                if normalize_ask(ask.text) != needle_key and self.writer.n_variants(ask) >= 2:
                    return ask

        first = pick_ask()
        second, third = pick_ask(), pick_ask()
        examples = [
            [(first, 0), (first, 1)],
            [(second, 0)] if rng.random() < 0.5 or third == second else [(second, 0), (third, 0)],
        ]
        blocks = []
        for pairs, target_ordinal in ((examples[0], rng.randint(1, 2)), (examples[1], 1)):
            texts = [pair.text for pair in self._pairs([(self._index[ask], v) for ask, v in pairs])]
            lines = []
            for (ask, _), text in zip(pairs, texts, strict=True):
                lines += [f"User: {ask.text}", f"Assistant: {text}"]
            target_ask = pairs[0][0]
            target = [t for (a, _), t in zip(pairs, texts, strict=True) if a == target_ask][target_ordinal - 1]
            example_string = random_string(rng)
            query = QUERY_TEMPLATE.format(
                random_string=example_string,
                ordinal=ordinal(target_ordinal),
                format=target_ask.format,
                entity=target_ask.entity,
            )
            lines += [f"User: {query}", f"Assistant: {example_string}{target}"]
            blocks.append("======EXAMPLE======\n" + "\n".join(lines) + "\n\n======END EXAMPLE======\n")
        return PREAMBLE_HEADER + "\n\n" + "\n".join(blocks)

    @staticmethod
    def _prompt_json(preamble: str, pairs: Sequence[_Pair], query: str) -> tuple[str, int, int]:
        """`json.dumps` of the messages, byte for byte, from the pairs' ready JSON, and where the
        pairs' messages start and end in it. Joined at once: a prompt of the 1M bin is 4 MB, and
        joining the pairs first, then the prompt around them, copied them twice."""
        first = f'[{{"role": "user", "content": {json.dumps(preamble)}}}'
        last = f'{{"role": "user", "content": {json.dumps(query)}}}]'
        prompt = ", ".join([first, *[pair.messages_json for pair in pairs], last])
        return prompt, len(first) + 2, len(prompt) - len(last) - 2

    # -- what fits ---------------------------------------------------------------------------
    def needle_floor(self, n_needles: int) -> int:
        """Tokens that n needles take at least: each is an ask (the shortest has this many tokens)
        and its writing, which is never empty."""
        return n_needles * (min(self._ask_token_counts) + 1)

    def typical_fixed(self, n_needles: int) -> dict[str, tuple[int, int]]:
        """Per needle format: (its median writing, the tokens that a row's preamble, n needles,
        query and answer typically take), from the median of PROBE_WRITINGS writings of the
        format's first ask and of PROBE_PREAMBLES preambles, drawn with a fixed seed."""
        candidates = self._needle_candidates(n_needles)
        rng = derived_rng("typical fixed", n_needles)
        preambles = [self._preamble(rng, "") for _ in range(PROBE_PREAMBLES)]
        preamble = int(statistics.median(count_tokens_batch(preambles, tokenizer=self.tokenizer)))
        typical: dict[str, tuple[int, int]] = {}
        for ask in candidates:
            if ask.format in typical:
                continue
            space = min(self._needle_space(ask, n_needles), PROBE_WRITINGS)
            writing = int(statistics.median(w.n_tokens for w in self.writer.writings([(ask, v) for v in range(space)])))
            query = QUERY_TEMPLATE.format(
                random_string=random_string(rng), ordinal=ordinal(n_needles), format=ask.format, entity=ask.entity
            )
            needles = n_needles * (self._ask_token_counts[self._index[ask]] + writing)
            typical[ask.format] = (writing, preamble + needles + count_tokens(query, self.tokenizer) + writing)
        return typical

    # -- assembly ----------------------------------------------------------------------------
    def sample(
        self,
        *,
        n_needles: int,
        seed: int,
        token_bin: Bin | None = None,
        tokens: int | None = None,
    ) -> Sample:
        """One sample whose token total lies in `token_bin`, or is just below `tokens`."""
        if token_bin is not None and tokens is None:
            lowest, highest = token_bin.smallest, token_bin.upper
        elif tokens is not None and token_bin is None:
            lowest, highest = tokens_window(tokens)
        else:
            raise ValueError("give exactly one of token_bin or tokens")
        if n_needles < 1:
            raise AssemblyError("n_needles must be at least 1")
        candidates = self._needle_candidates(n_needles)
        rng = derived_rng("sample", seed)
        # Uniform over the bin; every attempt re-draws the target so small bins stay uniform too.
        fixed_costs: list[int] = []
        short_totals: list[int] = []
        for _ in range(MAX_ATTEMPTS):
            target = rng.randint(lowest, highest) if token_bin is not None else highest  # tokens=N: N itself
            outcome = self._attempt(rng, candidates, n_needles, target, lowest, seed, token_bin)
            if isinstance(outcome, Sample):
                return outcome
            if isinstance(outcome, _Shortfall):
                (fixed_costs if outcome.total is None else short_totals).append(outcome.total or outcome.fixed)
        where = str(token_bin) if token_bin is not None else f"{lowest}..{highest} tokens"
        if short_totals:
            raise AssemblyError(
                f"cannot fill {where} with {n_needles} needles: the closest total reached was "
                f"{max(short_totals)} tokens (the writer's writings are too long to close the gap)"
            )
        raise AssemblyError(
            f"cannot fit {n_needles} needles into {where}: the preamble, needles, query and answer "
            f"alone take at least {min(fixed_costs, default=0)} tokens"
        )

    def _attempt(
        self,
        rng: random.Random,
        candidates: list[Ask],
        n_needles: int,
        target: int,
        lowest: int,
        seed: int,
        token_bin: Bin | None,
    ) -> Sample | _Shortfall | None:
        """A sample, why the token budget was missed, or None to simply retry."""
        needle_ask = rng.choice(candidates)
        needle_key = normalize_ask(needle_ask.text)
        variants = rng.sample(range(self._needle_space(needle_ask, n_needles)), n_needles)
        needles = self._pairs([(self._index[needle_ask], v) for v in variants])
        if len({normalize_writing(p.text) for p in needles}) < n_needles:
            return None  # the writer repeated itself (up to case and spacing); draw another needle ask
        target_ordinal = rng.randint(1, n_needles)
        secret = random_string(rng)
        preamble = self._preamble(rng, needle_key)
        query = QUERY_TEMPLATE.format(
            random_string=secret,
            ordinal=ordinal(target_ordinal),
            format=needle_ask.format,
            entity=needle_ask.entity,
        )
        answer = secret + needles[target_ordinal - 1].text
        preamble_tokens, query_tokens, answer_tokens = count_tokens_batch(
            [preamble, query, answer], num_threads=1, tokenizer=self.tokenizer
        )
        fixed = preamble_tokens + query_tokens + answer_tokens + sum(map(_pair_tokens, needles))
        if fixed > target:
            return _Shortfall(fixed=fixed)

        # Its own stream, so how far the fill reads ahead never shifts the draws that follow.
        distractors = self._fill(random.Random(rng.getrandbits(64)), needle_key, target - fixed)
        total = fixed + sum(map(_pair_tokens, distractors))
        if total < lowest:
            return _Shortfall(fixed=fixed, total=total)

        slots = needle_slots(rng, len(distractors) + n_needles, n_needles)
        pairs = interleave(needles, distractors, slots)

        prompt, pairs_start, pairs_end = self._prompt_json(preamble, pairs, query)
        # The secret is ASCII letters and digits, which JSON keeps as they are: absent from the
        # pairs' JSON, it is in no text; present (rarely, e.g. in an escape), the texts decide.
        if secret in preamble or (
            prompt.find(secret, pairs_start, pairs_end) >= 0
            and any(secret in p.ask.text or secret in p.text for p in pairs)
        ):
            return None  # vanishingly rare; a new random string means a new attempt
        needle_indices = tuple(1 + 2 * slot for slot in slots)
        row = MrcrRow(
            prompt=prompt,
            answer=answer,
            random_string_to_prepend=secret,
            n_needles=n_needles,
            desired_msg_index=needle_indices[target_ordinal - 1],
            total_messages=2 + 2 * len(pairs),
            n_chars=len(preamble) + sum(map(_pair_chars, pairs)) + len(query),
            date_added=self.date_added,
        )
        return Sample(
            row=row,
            needle_indices=needle_indices,
            target_ordinal=target_ordinal,
            prompt_tokens=total - answer_tokens,
            n_tokens=total,
            bin=str(token_bin) if token_bin is not None else f"tokens={target}",
            format=needle_ask.format,
            entity=needle_ask.entity,
            seed=seed,
        )

    def _fill(self, rng: random.Random, needle_key: str, budget: int) -> list[_Pair]:
        """Distractor pairs, uniform over asks, adding up to at most `budget` tokens and close to it,
        in random order."""
        chosen = fill_budget(budget, lambda left: self._draw_distractors(rng, needle_key, max(8, left // 360)))
        # Only short writings fit the last of the budget: shuffled, no position favours a format.
        rng.shuffle(chosen)
        return chosen
