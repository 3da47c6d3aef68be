"""Offline MRCR v2 writings: deterministic text whose structure follows the format (subject
lines, headings, stanzas, hashtags, a riddle's answer) and whose register follows the style
(the templates and word lists of `formats/v2_styles.json`). Needs no network."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from ..._seeding import derived_rng
from ..._tokens import DEFAULT_TOKENIZER
from ...writers._memo import MemoizedWriter
from ._catalog import Register, V2Catalog, V2Key, load_v2_catalog

#: Distinct writings per key, as in the upstream data (needles use up to 8 of them).
VARIANTS_PER_KEY = 8
# o200k characters per token of this text, measured on a few thousand writings.
CHARS_PER_TOKEN = 4.6
# Few-shot writings are kept short so the block fits the smallest bucket with room to spare.
FEWSHOT_TOKENS = (70, 45, 100)
_Z90 = 1.2815515655446004


def _target_chars(rng: random.Random, median: int, p10: int, p90: int) -> int:
    sigma = math.log(p90 / p10) / (2 * _Z90)
    tokens = median * math.exp(rng.gauss(0.0, sigma))
    return int(min(max(tokens, p10 / 2), p90 * 1.5) * CHARS_PER_TOKEN)


class _Composer:
    def __init__(self, catalog: V2Catalog, key: V2Key, variant: int, rng: random.Random) -> None:
        self.words = catalog.words
        self.register: Register = catalog.register(key.style)
        self.key = key
        self.angle = catalog.angles[variant % len(catalog.angles)]
        self.rng = rng

    def pick(self, kind: str) -> str:
        return self.rng.choice(self.words[kind])

    def sentence(self, opener: bool = True) -> str:
        rng = self.rng
        text = rng.choice(self.register.templates).format(
            topic=self.key.topic,
            noun=self.pick("noun"),
            adj=self.pick("adj"),
            verb=self.pick("verb"),
            unit=self.pick("unit"),
            num=rng.randint(10, 999),
            small=rng.randint(2, 12),
            code=f"{rng.choice('ABCDEFGHKLMNPRSTVWXZ')}-{rng.randint(100, 999)}",
        )
        if opener and rng.random() < 0.3:
            lead = rng.choice(self.register.openers)
            if text.split()[0] != lead.split()[0]:
                text = f"{lead} {text[0].lower()}{text[1:]}"
        return text

    def paragraph(self, lo: int = 3, hi: int = 6) -> str:
        return " ".join(self.sentence() for _ in range(self.rng.randint(lo, hi)))

    def title(self) -> str:
        topic = self.key.topic[0].upper() + self.key.topic[1:]
        return f"The {self.pick('adj').title()} {self.pick('noun').title()} of {topic}"

    def angle_line(self) -> str:
        return f"{self.rng.choice(self.register.openers)} I set this down {self.angle}."

    def fill(self, head: list[str], make, chars: int, tail: Sequence[str] = (), sep: str = "\n\n") -> str:
        parts = list(head)
        size = sum(map(len, parts)) + sum(map(len, tail))
        while size < chars or len(parts) == len(head):
            part = make()
            parts.append(part)
            size += len(part) + len(sep)
        return sep.join([*parts, *tail])


def compose_v2_writing(catalog: V2Catalog, key: V2Key, variant: int, seed: int) -> str:
    rng = derived_rng("mrcr-v2 offline", seed, tuple(key), variant)
    lengths = FEWSHOT_TOKENS if key.style in catalog.fewshot_styles else None
    if lengths is None:
        spec = catalog.format(key.format).tokens
        lengths = (spec.median, spec.p10, spec.p90)
    chars = _target_chars(rng, *lengths)
    c = _Composer(catalog, key, variant, rng)
    reg = c.register
    name = c.pick("name")
    if key.format == "email":
        head = [f"Subject: {c.title()}", reg.greeting, c.angle_line()]
        return c.fill(head, lambda: c.paragraph(2, 4), chars, [f"{reg.signoff}\n{name}"])
    if key.format == "short story":
        head = [c.title(), f"{name} came to {key.topic} {c.angle}. {c.sentence()}"]
        return c.fill(head, c.paragraph, chars, [reg.exclaim])
    if key.format == "blog post":
        head = [f"# {c.title()}", f"{c.angle_line()} {c.sentence()}"]
        return c.fill(
            head, lambda: f"## {c.pick('adj').title()} {c.pick('noun')}s\n\n{c.paragraph(2, 5)}", chars, [reg.exclaim]
        )
    if key.format == "tweet":
        tags = [rng.choice(reg.hashtags), "#" + "".join(w.title() for w in key.topic.split())]
        body = " ".join(c.sentence() for _ in range(max(1, round(chars / 110))))
        return f"{body} {' '.join(tags)}"
    if key.format == "poem":

        def stanza() -> str:
            lines = []
            for _ in range(4):
                words = c.sentence(opener=False).rstrip(".!?").split()
                cut = rng.randint(4, min(8, len(words)))
                lines.append(" ".join(words[:cut]).rstrip(",;:"))
            return "\n".join(lines)

        return c.fill([c.title()], stanza, chars, [reg.exclaim])
    if key.format == "essay":
        head = [c.title(), f"{c.angle_line()} {c.paragraph()}"]
        return c.fill(head, lambda: c.paragraph(4, 7), chars, [f"In conclusion, {c.sentence(opener=False)}"])
    if key.format == "riddle":

        def clue() -> str:
            return f"I am {c.pick('adj')} as a {c.pick('noun')} that {c.pick('verb')}."

        head = [reg.greeting, c.angle_line()]
        return c.fill(head, clue, chars, ["What am I?", f"Answer: {key.topic}"], sep="\n")
    return c.fill([c.title()], c.paragraph, chars)  # a format added to the catalog without a shape


class V2OfflineWriter(MemoizedWriter):
    """Deterministic offline writings for v2 keys; each distinct writing is tokenized once."""

    name = "offline"
    variants_per_key = VARIANTS_PER_KEY

    def __init__(self, seed: int = 0, catalog: V2Catalog | None = None, tokenizer: str = DEFAULT_TOKENIZER) -> None:
        super().__init__(tokenizer)
        self.seed = seed
        self.catalog = catalog or load_v2_catalog()

    def compose(self, key: V2Key, variant: int) -> str:  # type: ignore[override]
        return compose_v2_writing(self.catalog, key, variant, self.seed)

    def describe(self) -> dict:
        return {"name": self.name, "seed": self.seed, "variants_per_key": VARIANTS_PER_KEY}
