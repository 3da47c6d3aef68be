"""Offline MRCR v2 writings: deterministic text whose structure follows the format (subject
lines, headings, stanzas, hashtags, a riddle's answer) and whose register follows the style
(the templates and word lists of `formats/v2_styles.json`). Needs no network."""

from __future__ import annotations

import functools
import json
import math
import random
import re
from collections.abc import Callable, Sequence

from ..._paths import _data_dir
from ..._seeding import derived_rng
from ..._tokens import DEFAULT_TOKENIZER
from ...writers._lexicon import is_plural, lexicon
from ...writers._memo import MemoizedWriter
from ._catalog import Register, V2Catalog, V2Key, load_v2_catalog

#: Distinct writings per key, as in the upstream data (needles use up to 8 of them).
VARIANTS_PER_KEY = 8
# o200k characters per token of this text, measured on a few thousand writings.
CHARS_PER_TOKEN = 4.6
# Few-shot writings are kept short so the block fits the smallest bucket with room to spare.
FEWSHOT_TOKENS = (70, 45, 100)
_Z90 = 1.2815515655446004
# difflib.SequenceMatcher's autojunk applies to texts of at least this many characters.
_AUTOJUNK_CHARS = 200


def _target_chars(rng: random.Random, median: int, p10: int, p90: int) -> int:
    sigma = math.log(p90 / p10) / (2 * _Z90)
    tokens = median * math.exp(rng.gauss(0.0, sigma))
    return int(min(max(tokens, p10 / 2), p90 * 1.5) * CHARS_PER_TOKEN)


#: (title marks, (heading open, heading close)) of a blog post: Markdown headings of two levels, bold, or plain lines.
_BLOG_MARKUP = (("# ", ("## ", "")), ("# ", ("### ", "")), ("", ("**", "**")), ("## ", ("### ", "")), ("", ("", "")))

_SLOT = re.compile(r"\{(\w+)\}")
# A template as (format string, its slots in order).
_Template = tuple[str, tuple[str, ...]]


def _compile(templates: Sequence[str]) -> tuple[_Template, ...]:
    return tuple((_SLOT.sub("%s", t.replace("%", "%%")), tuple(_SLOT.findall(t))) for t in templates)


@functools.cache
def _grammar() -> tuple[float, tuple[_Template, ...], dict[str, tuple[_Template, ...]]]:
    """(share of style templates, sentence frames, the clause grammar) of `formats/v2_grammar.json`."""
    data = json.loads((_data_dir("formats") / "v2_grammar.json").read_text(encoding="utf-8"))
    rules = {
        "C": _compile(data["clauses"]),
        "PP": _compile(data["phrases"]),
        "TITLE": _compile(data["titles"]),
        "ANGLE": _compile(data["angle_lines"]),
        "QUESTION": _compile(data["riddle_questions"]),
        "ANSWER": _compile(data["riddle_answers"]),
        "SUB": _compile(data["subordinators"]),
    }
    return float(data["style_share"]), _compile(data["frames"]), rules


#: Words of the styles' templates that agree with the topic as a subject (`{is}`, `wait{s}`, ...).
_SINGULAR_AGREEMENT = {"s": "s", "is": "is", "was": "was", "does": "does", "hath": "hath", "eth": "eth", "its": "its"}
_PLURAL_AGREEMENT = {"s": "", "is": "are", "was": "were", "does": "do", "hath": "have", "eth": "", "its": "their"}


class _Composer:
    def __init__(self, catalog: V2Catalog, key: V2Key, variant: int, rng: random.Random) -> None:
        self.words = catalog.words
        self.register: Register = catalog.register(key.style)
        self.key = key
        self.angle = catalog.angles[variant % len(catalog.angles)]
        self.rng = rng
        words = lexicon()
        # What agrees with the topic as a subject (`formats/lexicon.json` says which topics are plural).
        self.plural = is_plural(key.topic)
        agreeing = {"tv3": words["v" if self.plural else "v3"], "tvt3": words["vt" if self.plural else "vt3"]}
        # The writing's own theme words: sentences keep returning to them, and two writings differ in them.
        self.slots: dict[str, Sequence[str]] = {
            **words,
            **agreeing,
            "topic": (key.topic,),
            "t1": (rng.choice(words["n"]),),
            "t2": (rng.choice(words["n"]),),
            "ta": (rng.choice(words["a"]),),
            "Topic": (key.topic[0].upper() + key.topic[1:],),
            "NS": tuple(w.capitalize() for w in (rng.choice(words["ns"]), rng.choice(words["ns"]))),
            "VT3": (rng.choice(agreeing["tvt3"]).capitalize(),),  # as long as vt3: the same draw
            "angle": (self.angle,),
        }

    def pick(self, kind: str) -> str:
        return self.rng.choice(self.words[kind])

    def render(self, template: _Template) -> str:
        fmt, slots = template
        rules = _grammar()[2]
        r = self.rng.random
        values = []
        for slot in slots:
            if slot in rules:
                options = rules[slot]
                values.append(self.render(options[int(r() * len(options))]))
            else:
                words = self.slots[slot]
                values.append(words[int(r() * len(words))])
        return fmt % tuple(values)

    def styled(self) -> str:
        """One of the style's own templates, its words drawn from the lexicon."""
        rng = self.rng
        slots = self.slots
        plural = self.plural
        return rng.choice(self.register.templates).format(
            topic=self.key.topic,
            noun=rng.choice(slots["n"]),
            adj=rng.choice(slots["a"]),
            verb=slots["v3"][verb := rng.randrange(len(slots["v3"]))],  # as rng.choice draws
            tverb=slots["tv3"][verb],
            **(_PLURAL_AGREEMENT if plural else _SINGULAR_AGREEMENT),
            unit=self.pick("unit"),
            num=rng.randint(10, 999),
            small=rng.randint(2, 12),
            code=f"{rng.choice('ABCDEFGHKLMNPRSTVWXZ')}-{rng.randint(100, 999)}",
        )

    def sentence(self, opener: bool = True) -> str:
        rng = self.rng
        style_share, frames, _ = _grammar()
        if rng.random() < style_share:
            text = self.styled()
        else:
            text = self.render(frames[int(rng.random() * len(frames))])
            text = text[0].upper() + text[1:]
        if opener and rng.random() < 0.12:
            lead = rng.choice(self.register.openers)
            if text.split()[0] != lead.split()[0]:
                text = f"{lead} {text[0].lower()}{text[1:]}"
        return text

    def paragraph(self, lo: int = 3, hi: int = 6) -> str:
        return " ".join(self.sentence() for _ in range(self.rng.randint(lo, hi)))

    def title(self) -> str:
        return self.render(self.rng.choice(_grammar()[2]["TITLE"]))

    def angle_line(self) -> str:
        return self.render(self.rng.choice(_grammar()[2]["ANGLE"]))

    def fill(
        self, head: list[str], make, chars: int, tail: Sequence[str] = (), sep: str = "\n\n", nearest: bool = False
    ) -> str:
        """The head, then parts from `make` (at least one) up to the first that ends past `chars`, or with
        `nearest` up to the one that ends nearest it, then the tail."""
        parts = list(head)
        size = sum(map(len, parts)) + sum(map(len, tail))
        while True:
            if len(parts) > len(head) and size >= chars:
                break
            part = make()
            if nearest and len(parts) > len(head) and size + (len(part) + len(sep)) / 2 >= chars:
                break
            parts.append(part)
            size += len(part) + len(sep)
        return sep.join([*parts, *tail])


def compose_v2_writing(catalog: V2Catalog, key: V2Key, variant: int, seed: int) -> str:
    """The offline writing `variant` of `key`: its length drawn from the format's token spec (the
    few-shot styles' are short), its shape the format's (`_SHAPES`)."""
    rng = derived_rng("mrcr-v2 offline", seed, tuple(key), variant)
    lengths = FEWSHOT_TOKENS if key.style in catalog.fewshot_styles else None
    if lengths is None:
        spec = catalog.format(key.format).tokens
        lengths = (spec.median, spec.p10, spec.p90)
    chars = _target_chars(rng, *lengths)
    c = _Composer(catalog, key, variant, rng)
    name = c.pick("name")
    shape = _SHAPES.get(key.format)
    if shape is None:
        return c.fill([c.title()], c.paragraph, chars)  # a format added to the catalog without a shape
    return shape(c, chars, name)


def _email(c: _Composer, chars: int, name: str) -> str:
    reg = c.register
    head = [f"Subject: {c.title()}", reg.greeting, c.angle_line()]
    # Paragraphs up to the one ending nearest the drawn length (the first past it made emails 10% longer
    # than the spec); the short formats keep the first past it, as shorter ones raise the v2 floor.
    return c.fill(head, lambda: c.paragraph(2, 4), chars, [f"{reg.signoff}\n{name}"], nearest=True)


def _short_story(c: _Composer, chars: int, name: str) -> str:
    head = [c.title(), f"{name} came to {c.key.topic} {c.angle}. {c.sentence()}"]
    return c.fill(head, c.paragraph, chars, [c.register.exclaim])


def _blog_post(c: _Composer, chars: int, name: str) -> str:
    rng = c.rng
    # One markup for the title and headings per post, as writers differ in it: two posts share their
    # heading lines (a blank line, the marks, a capital) less often, and those lines are much of what a
    # post is matched on in another post.
    title_marks, (open_mark, close_mark) = rng.choice(_BLOG_MARKUP)
    head = [f"{title_marks}{c.title()}", f"{c.angle_line()} {c.sentence()}"]

    def section() -> str:
        heading = f"{rng.choice(c.slots['a']).title()} {rng.choice(c.slots['ns'])}"
        return f"{open_mark}{heading}{close_mark}\n\n{c.paragraph(2, 5)}"

    return c.fill(head, section, chars, [c.register.exclaim])


def _tweet(c: _Composer, chars: int, name: str) -> str:
    rng = c.rng
    # One to three hashtags, the topic's in camel case or in lower case, as posts differ in them.
    words = c.key.topic.split()
    topic_tag = "#" + "".join(w.title() for w in words) if rng.random() < 0.6 else "#" + "".join(words)
    tags = [topic_tag, *rng.sample(c.register.hashtags, rng.choice((0, 1, 1, 2)))]
    rng.shuffle(tags)
    # Bare clauses, not the prose frames: a post is terse, and short texts share little with the rest.
    # Most clauses run on after a comma or a dash rather than open a sentence of their own: sentence
    # starts and stops are what a short text is matched on (SequenceMatcher junks no character in
    # a text under 200 characters), so a wrong post graded against the answer scores less.
    clauses = _grammar()[2]["C"]
    tail = " " + " ".join(tags)
    body = ""
    # The clause that ends nearest the drawn length is the last (not the first past it, which made
    # posts a few tokens longer than the spec), but never under 200 characters: SequenceMatcher junks
    # no character of a shorter reply, so any post that short scores 0.1-0.25 against the answer, five
    # to ten times a longer one (the tenth of posts that short gave a tenth of the random-writing
    # floor). The spec's p10, 35 tokens, is about 165 characters; the p10 here is 46 tokens.
    while True:
        clause = c.render(clauses[int(rng.random() * len(clauses))])
        if not body:
            piece = clause[0].upper() + clause[1:]
        elif rng.random() < 0.4:
            piece = rng.choice(".!") + " " + clause[0].upper() + clause[1:]
        else:
            piece = rng.choice((", ", ", and ", " - ", "; ")) + clause
        size = len(body) + len(tail)
        if body and size >= _AUTOJUNK_CHARS and size + len(piece) / 2 >= chars:
            break
        body += piece
    return body + rng.choice(".!") + tail


def _poem(c: _Composer, chars: int, name: str) -> str:
    rng = c.rng

    def stanza() -> str:
        lines = []
        for _ in range(4):
            words = c.sentence(opener=False).rstrip(".!?").split()
            cut = rng.randint(4, min(8, len(words)))
            lines.append(" ".join(words[:cut]).rstrip(",;:"))
        # Lines run on in lower case after the first, as in much free verse.
        return "\n".join([lines[0], *(line[0].lower() + line[1:] for line in lines[1:])])

    return c.fill([c.title()], stanza, chars, [c.register.exclaim])


def _essay(c: _Composer, chars: int, name: str) -> str:
    head = [c.title(), f"{c.angle_line()} {c.paragraph()}"]
    conclusion = [f"In conclusion, {c.sentence(opener=False)}"]
    return c.fill(head, lambda: c.paragraph(4, 7), chars, conclusion, nearest=True)


def _riddle(c: _Composer, chars: int, name: str) -> str:
    clues: list[str] = []

    def clue() -> str:
        # The clues are verse lines, as in a poem: no stop at their ends, lower case after the first
        # (sentence starts and stops are much of what a short text is matched on in another).
        line = c.sentence(opener=False).rstrip(".!?")
        clues.append(line if not clues or line.startswith("I ") else line[0].lower() + line[1:])
        return clues[-1]

    # No fixed greeting and no angle line (emails, blog posts and essays open with those): a riddle
    # is short, and what it shares with other writings is most of its likeness to them.
    rules = _grammar()[2]
    riddle_end = [c.render(c.rng.choice(rules["QUESTION"])), c.render(c.rng.choice(rules["ANSWER"]))]
    return c.fill([], clue, chars, riddle_end, sep="\n")


#: The shape of each format's writing (`name`: a person's name the writing may sign or star).
_SHAPES: dict[str, Callable[[_Composer, int, str], str]] = {
    "email": _email,
    "short story": _short_story,
    "blog post": _blog_post,
    "tweet": _tweet,
    "poem": _poem,
    "essay": _essay,
    "riddle": _riddle,
}


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
