"""The offline writer's vocabulary, templates and length model (its formats are in `_offline_formats`).

``compose_writing(format_name, entity, variant, seed, tokens)`` (in `_offline_formats`) returns a
synthetic writing that answers the ask ``write a {format_name} about {entity}``.

Design notes
------------
* Determinism: every writing gets its own ``random.Random`` seeded from a blake2b
  digest of ``(seed, format_name, entity, variant)``; Python's salted ``hash()`` is
  never used, so the same inputs give the same text in every process.
* Vocabulary: the common words come from the project's own lexicon
  (``formats/lexicon.json``, through ``mrcr_gen.writers._lexicon``); Faker is used once
  (lazily, on first use) for proper nouns only: names, cities, companies, addresses, jobs.
* Grammar: phrases (noun phrases, clauses, ...) and per-format sentence templates live in
  ``formats/offline_templates.json``. For speed, the phrases and each format's body sentences
  are rendered once per process, with a fixed generator, into large pools of ready strings
  (``phrase_pool_sizes``, ``sentence_pool_size``) holding marks where a writing's own words go
  (its entity, names, theme words); a writing picks whole sentences and fills the marks.
* Length: the target o200k token count is drawn from a distribution whose
  10th/50th/90th percentiles match ``tokens=(median, p10, p90)`` (a split
  log-normal; formats whose p10 is far below the median are modelled as a mix of
  short clarification replies and full pieces).  The writer cannot tokenize, so it
  converts the target to characters with a per-format calibrated
  characters-per-token ratio and stops adding sentences/lines when closest to it.
"""

from __future__ import annotations

import json
import math
import random
import re
import threading
import zlib
from collections.abc import Sequence
from typing import Any

from ..._paths import _data_dir
from ...writers._lexicon import is_plural, lexicon

FORMAT_NAMES: tuple[str, ...] = (
    "poem",
    "song",
    "short essay",
    "short news article",
    "email",
    "social media post",
    "diary entry",
    "formal letter",
    "short scene in a play",
    "riddle",
)

# Calibrated o200k characters-per-token ratios of the text each composer emits
# (measured over a few thousand writings; see tests/writers/test_offline.py). The scene's is set
# so its median lies a little under the real one (about 595 of 613 tokens): the check that two
# needles fit the smallest --tokens target (4160) probes the median of only 16 writings.
_CHARS_PER_TOKEN: dict[str, float] = {
    "poem": 4.15,
    "song": 4.20,
    "short essay": 4.36,
    "short news article": 4.51,
    "email": 4.28,
    "social media post": 4.13,
    "diary entry": 4.38,
    "formal letter": 4.13,
    "short scene in a play": 3.72,
    "riddle": 4.25,
}
_DEFAULT_CPT = 4.8

# Share of writings that are a short clarification question instead of the piece.
_CLARIFY_RARE = 0.002  # formats whose length distribution has no short tail
_CLARIFY_TAIL = 0.15  # formats whose p10 is far below the median (email in MRCR)
_TAIL_RATIO = 0.5  # p10 < _TAIL_RATIO * median => short-reply tail modelled

_Z90 = 1.2815515655446004  # standard normal 90th percentile

# --------------------------------------------------------------------------- #
# Seeding and length targets
# --------------------------------------------------------------------------- #


def _inv_norm(p: float) -> float:
    # Acklam's rational approximation (abs error < 1.2e-9); only used at setup.
    a = (
        -3.969683028665376e01,
        2.209460984245205e02,
        -2.759285104469687e02,
        1.383577518672690e02,
        -3.066479806614716e01,
        2.506628277459239e00,
    )
    b = (
        -5.447609879822406e01,
        1.615858368580409e02,
        -1.556989798598866e02,
        6.680131188771972e01,
        -1.328068155288572e01,
    )
    c = (
        -7.784894002430293e-03,
        -3.223964580411365e-01,
        -2.400758277161838e00,
        -2.549671509763030e00,
        4.374664141464968e00,
        2.938163982698783e00,
    )
    d = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e00, 3.754408661907416e00)
    if p < 0.02425:
        q = math.sqrt(-2 * math.log(p))
        return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / (
            (((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1
        )
    if p > 1 - 0.02425:
        return -_inv_norm(1 - p)
    q = p - 0.5
    r = q * q
    return (
        (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5])
        * q
        / (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1)
    )


_PLAN_CACHE: dict[tuple[int, int, int], tuple[float, float, float, float]] = {}


def _length_plan(tokens: tuple[int, int, int]) -> tuple[float, float, float, float]:
    """(clarify_prob, log_median, sigma_low, sigma_high) for a quantile triple."""
    plan = _PLAN_CACHE.get(tokens)
    if plan is not None:
        return plan
    median, p10, p90 = (float(x) for x in tokens)
    if not (0 < p10 <= median <= p90):
        raise ValueError(f"tokens must be (median, p10, p90) with 0 < p10 <= median <= p90: {tokens}")
    if p10 < _TAIL_RATIO * median:
        # Low decile is made of short replies: fit the full pieces to the median and
        # p90 at their shifted percentiles within the non-clarification share.
        q = _CLARIFY_TAIL
        z50 = _inv_norm((0.5 - q) / (1 - q))
        z90 = _inv_norm((0.9 - q) / (1 - q))
        sigma = math.log(p90 / median) / (z90 - z50) if p90 > median else 0.0
        mu = math.log(median) - z50 * sigma
        plan = (q, mu, sigma, sigma)
    else:
        plan = (
            _CLARIFY_RARE,
            math.log(median),
            math.log(median / p10) / _Z90,
            math.log(p90 / median) / _Z90,
        )
    _PLAN_CACHE[tokens] = plan
    return plan


def sample_target_tokens(rng: random.Random, tokens: tuple[int, int, int]) -> float:
    """Draw a target length (tokens) for a full piece, matching the quantiles."""
    _, mu, s_lo, s_hi = _length_plan(tuple(int(x) for x in tokens))  # type: ignore[arg-type]
    z = rng.gauss(0.0, 1.0)
    if z < -2.5:
        z = -2.5
    elif z > 2.5:
        z = 2.5
    return math.exp(mu + z * (s_lo if z < 0 else s_hi))


# --------------------------------------------------------------------------- #
# Data: templates and word lists live in formats/offline_templates.json
# --------------------------------------------------------------------------- #


def _load_data() -> dict:
    """The offline writer's sentence templates and word lists (read once, at import)."""
    path = _data_dir("formats") / "offline_templates.json"
    return json.loads(path.read_text(encoding="utf-8"))


_DATA = _load_data()


def _words(name: str) -> tuple[str, ...]:
    return tuple(_DATA[name])


_MONTHS = _words("months")
_WEEKDAYS = _words("weekdays")
_TIMES = _words("times")
_PLACES = _words("places")
_WEATHER = _words("weather")
_EMOJI = _words("emoji")
_EMAIL_CLOSE = _words("email_close")
_SCENE_END = _words("scene_end")
_RIDDLE_ASK = _words("riddle_ask")
_CLARIFY_GENERIC = _words("clarify_generic")
_CLARIFY_FIRST_GENERIC = _words("clarify_first_generic")
_CLARIFY_MORE = _words("clarify_more")
_CLARIFY_END = _words("clarify_end")
_LETTER_TITLES: dict[str, tuple[str, ...]] = {k: tuple(v) for k, v in _DATA["letter_titles"].items()}


#: `titles_for` of each first name asked so far (of every name in the pool once `every_pool` ran).
_TITLES: dict[str, tuple[str, ...]] = {}


def titles_for(first_name: str) -> tuple[str, ...]:
    """The letter titles that fit a first name of the names pool: Mr. for a man's name, Ms. for a
    woman's (as Faker's lists of first names say), Dr. for either and for a name on both lists."""
    titles = _TITLES.get(first_name)
    if titles is None:
        from faker.providers.person.en_US import Provider  # the lists the names pool draws from

        male, female = first_name in Provider.first_names_male, first_name in Provider.first_names_female
        titles = _LETTER_TITLES["male" if male and not female else "female" if female and not male else "either"]
        _TITLES[first_name] = titles
    return titles


_CLARIFY: dict[str, tuple[str, ...]] = {k: tuple(v) for k, v in _DATA["clarify"].items()}
_CLARIFY_FIRST: dict[str, tuple[str, ...]] = {k: tuple(v) for k, v in _DATA["clarify_first"].items()}


# --------------------------------------------------------------------------- #
# Vocabulary pools (built once from Faker)
# --------------------------------------------------------------------------- #

# Per-writing slots occupy the first indices of the pool list.
# t1..t3 and ta: the writing's own theme nouns and adjective, drawn per writing, so that sentences
# from the shared pools read differently in each writing (and keep to a few words, as a piece does).
# es, eis, edoes, ev3, evt3: what agrees with the entity as a subject ("s" or "", "is" or "are", ...).
_LOCAL_SLOTS = (
    *("e", "E", "ET", "p1", "p2", "p3", "P1", "P2", "P3", "me", "you", "t1", "t2", "t3", "ta"),
    *("es", "eis", "edoes", "ev3", "evt3"),
)
_LEXICON_SLOTS = ("a", "aa", "n", "ns", "an", "v", "v3", "vd", "vt", "vt3", "vtd", "d", "D", "pr", "op", "pe")
_GLOBAL_SLOTS = (
    *_LEXICON_SLOTS,
    "A",
    "N",
    "f",
    "l",
    "F",
    "c",
    "C",
    "j",
    "m",
    "day",
    "y",
    "st",
    "addr",
    "zip",
    "phone",
    "mail",
    "emo",
    "wd",
    "tm",
    "place",
    "wx",
)
# Phrase slots (NP a noun phrase, CL a clause, ...). The short ones are rendered once into pools of
# ready strings (`phrase_pool_sizes`: far cheaper per writing than rendering each use, and large enough
# that a row rarely repeats one); the others hold templates, rendered at each use.
_PHRASE_POOL_SIZES: dict[str, int] = _DATA["phrase_pool_sizes"]
_PHRASE_SLOTS = tuple(_PHRASE_POOL_SIZES) + tuple(name for name in _DATA["phrases"] if name not in _PHRASE_POOL_SIZES)
_SLOT_INDEX = {name: i for i, name in enumerate(_LOCAL_SLOTS + _GLOBAL_SLOTS + _PHRASE_SLOTS)}
_FIRST_LIVE_PHRASE = len(_LOCAL_SLOTS) + len(_GLOBAL_SLOTS) + len(_PHRASE_POOL_SIZES)
# Pre-rendered text holds the private-use character chr(_MARK_BASE + i) where local slot i (the entity,
# a name, a theme word) goes: `_Ctx.fill_marks` puts each writing's own values in.
_MARK_BASE = 0xE000
_MARKS_RE = re.compile("[" + "".join(chr(_MARK_BASE + i) for i in range(len(_LOCAL_SLOTS))) + "]")


_POOL_LOCK = threading.Lock()
_POOLS: list[list] | None = None


def _build_pools() -> list[list]:
    from faker import Faker  # imported lazily: costs ~0.2 s once

    fake = Faker("en_US")
    fake.seed_instance(0x4D524352)  # fixed: pools depend only on the Faker version
    first = sorted({fake.first_name() for _ in range(600)})
    last = sorted({fake.last_name() for _ in range(600)})
    words = lexicon()
    pools: dict[str, list] = {
        **{name: list(words[name]) for name in _LEXICON_SLOTS},
        "A": [w.capitalize() for w in words["a"]],
        "N": [w.capitalize() for w in words["n"]],
        "f": first,
        "l": last,
        "F": [fake.name_nonbinary() for _ in range(400)],
        "c": [fake.city() for _ in range(300)],
        "C": [fake.company() for _ in range(300)],
        "j": [fake.job() for _ in range(300)],
        "m": list(_MONTHS),
        "day": [str(i) for i in range(1, 29)],
        "y": [str(i) for i in range(2018, 2025)],
        "st": [fake.state_abbr(include_territories=False) for _ in range(200)],
        "addr": [fake.street_address() for _ in range(300)],
        "zip": [fake.zipcode() for _ in range(300)],
        "phone": [fake.numerify("(###) ###-####") for _ in range(200)],
        "mail": [fake.free_email() for _ in range(300)],
        "emo": list(_EMOJI),
        "wd": list(_WEEKDAYS),
        "tm": list(_TIMES),
        "place": list(_PLACES),
        "wx": list(_WEATHER),
    }
    out: list[list] = [[""] for _ in _LOCAL_SLOTS]
    out.extend(pools[name] for name in _GLOBAL_SLOTS)
    out.extend(list(_compile(_DATA["phrases"][name])) for name in _PHRASE_SLOTS)
    # Pre-render the pooled phrases with a fixed generator, in order (a later one may use an earlier).
    renderer = _marking_ctx(0x50484153, out)
    for name, size in _PHRASE_POOL_SIZES.items():
        index = _SLOT_INDEX[name]
        templates = out[index]
        out[index] = renderer.pools[index] = [renderer.render(renderer.pick(templates)) for _ in range(size)]
    return out


def _pools() -> list[list]:
    global _POOLS
    if _POOLS is None:
        with _POOL_LOCK:
            if _POOLS is None:
                _POOLS = _build_pools()
    return _POOLS


# --------------------------------------------------------------------------- #
# Templates
# --------------------------------------------------------------------------- #

_SLOT_RE = re.compile(r"\{(\w+)\}")
# (format string, slot kinds, whether a slot is a phrase rendered at each use, whether it opens with a slot)
_Tpl = tuple[str, tuple[int, ...], bool, bool]


def _compile(templates: Sequence[str]) -> tuple[_Tpl, ...]:
    out = []
    for t in templates:
        kinds = tuple(_SLOT_INDEX[m] for m in _SLOT_RE.findall(t))
        fmt = _SLOT_RE.sub("%s", t.replace("%", "%%"))
        out.append((fmt, kinds, any(k >= _FIRST_LIVE_PHRASE for k in kinds), fmt.startswith("%s")))
    return tuple(out)


_ESSAY_TITLES = _compile(_DATA["essay_titles"])
_ESSAY_OPEN = _compile(_DATA["essay_open"])
_ESSAY_CLOSE = _compile(_DATA["essay_close"])
_NEWS_TITLES = _compile(_DATA["news_titles"])
_NEWS_LEAD = _compile(_DATA["news_lead"])
_NEWS_CLOSE = _compile(_DATA["news_close"])
_EMAIL_SUBJECT = _compile(_DATA["email_subject"])
_EMAIL_OPEN = _compile(_DATA["email_open"])
_SOCIAL_OPEN = _compile(_DATA["social_open"])
_DIARY_OPEN = _compile(_DATA["diary_open"])
_DIARY_CLOSE = _compile(_DATA["diary_close"])
_SCENE_TITLES = _compile(_DATA["scene_titles"])
_SCENE_SETTING = _compile(_DATA["scene_setting"])
_SCENE_DIRECTION = _compile(_DATA["scene_direction"])
_POEM_TITLES = _compile(_DATA["poem_titles"])


def _marking_ctx(seed: int, pools: list[list]) -> _Ctx:
    """A renderer with a fixed generator that writes each local slot as its mark."""
    ctx = _Ctx(random.Random(seed), "", pools)
    for i in range(len(_LOCAL_SLOTS)):
        ctx.pools[i] = [chr(_MARK_BASE + i)]
    return ctx


_POOLED_KEYS: list[str] = []
_SENTENCE_POOLS: list[_SentencePool] = []


class _SentencePool:
    """The body sentences (or lines) of one format, rendered once per process with a fixed generator
    into `size` ready strings, marks in place of local slots: a writing then picks whole sentences,
    which costs a fraction of rendering them. The pool is large enough that a row rarely repeats one."""

    def __init__(self, key: str, size: int) -> None:
        self.templates = _compile(_DATA[key])
        self.size = size
        self.key = key
        self._sentences: list[str] | None = None
        _POOLED_KEYS.append(key)
        _SENTENCE_POOLS.append(self)

    def sentences(self) -> list[str]:
        if self._sentences is None:
            pools = _pools()
            with _POOL_LOCK:
                if self._sentences is None:
                    ctx = _marking_ctx(zlib.crc32(self.key.encode()), pools)
                    templates = self.templates
                    self._sentences = [ctx.sentence(ctx.pick(templates)) for _ in range(self.size)]
        return self._sentences


_SENTENCE_POOL_SIZE: int = _DATA["sentence_pool_size"]
_ESSAY_BODY = _SentencePool("essay_body", _SENTENCE_POOL_SIZE)
_NEWS_BODY = _SentencePool("news_body", _SENTENCE_POOL_SIZE)
_NEWS_QUOTE = _SentencePool("news_quote", _SENTENCE_POOL_SIZE // 4)
_EMAIL_BODY = _SentencePool("email_body", _SENTENCE_POOL_SIZE)
_SOCIAL_BODY = _SentencePool("social_body", _SENTENCE_POOL_SIZE)
_DIARY_BODY = _SentencePool("diary_body", _SENTENCE_POOL_SIZE)
_LETTER_BODY = _SentencePool("letter_body", _SENTENCE_POOL_SIZE)
_SCENE_LINE = _SentencePool("scene_line", _SENTENCE_POOL_SIZE)
_POEM_LINE = _SentencePool("poem_line", _SENTENCE_POOL_SIZE)
_SONG_LINE = _SentencePool("song_line", _SENTENCE_POOL_SIZE)
_RIDDLE_LINE = _SentencePool("riddle_line", _SENTENCE_POOL_SIZE // 2)


#: Every pool this module renders: the word and phrase pools, each format's sentences, and the
#: letter titles of every first name of the names pool.
RenderedPools = tuple[list[list], list[list[str]], dict[str, tuple[str, ...]]]


def every_pool() -> RenderedPools:
    """Every pool, rendered now if not yet: what `install_pools` takes in another process. The
    titles too, so that a process given them never imports Faker (a tenth of a second)."""
    words = _pools()
    titles = {name: titles_for(name) for name in words[_SLOT_INDEX["f"]]}
    return words, [pool.sentences() for pool in _SENTENCE_POOLS], titles


def install_pools(pools: RenderedPools) -> None:
    """Take the pools `every_pool` rendered in another process of this same code (identical to the
    ones this process would render: fixed generators, fixed data) instead of rendering them."""
    global _POOLS
    words, sentences, titles = pools
    if len(sentences) != len(_SENTENCE_POOLS):
        raise ValueError(f"{len(sentences)} sentence pools handed over, {len(_SENTENCE_POOLS)} expected")
    with _POOL_LOCK:
        _POOLS = words
        for pool, rendered in zip(_SENTENCE_POOLS, sentences, strict=True):
            pool._sentences = rendered
        _TITLES.update(titles)


# The local slots that pre-rendered text can hold marks of.
_MARKED_SLOTS = tuple(
    sorted(
        {
            _SLOT_INDEX[name]
            for templates in [*(_DATA["phrases"][p] for p in _PHRASE_POOL_SIZES), *(_DATA[key] for key in _POOLED_KEYS)]
            for template in templates
            for name in _SLOT_RE.findall(template)
            if _SLOT_INDEX[name] < len(_LOCAL_SLOTS)
        }
    )
)


# --------------------------------------------------------------------------- #
# Composition helpers
# --------------------------------------------------------------------------- #


_STEPS: dict[int, tuple[int, ...]] = {}


class _Ctx:
    __slots__ = ("Entity", "entity", "pools", "r")

    def __init__(self, rng: random.Random, entity: str, pools: list[list] | None = None) -> None:
        self.r = rng.random
        pools = (pools or _pools())[:]
        ent = entity
        cap = ent[:1].upper() + ent[1:]
        title = " ".join(w[:1].upper() + w[1:] for w in ent.split(" "))
        fl = pools[_SLOT_INDEX["f"]]
        r = rng.random
        names = [fl[int(r() * len(fl))] for _ in range(3)]
        while names[1] == names[0]:
            names[1] = fl[int(r() * len(fl))]
        while names[2] in names[:2]:
            names[2] = fl[int(r() * len(fl))]
        pools[0] = [ent]
        pools[1] = [cap]
        pools[2] = [title]
        pools[3] = [names[0]]
        pools[4] = [names[1]]
        pools[5] = [names[2]]
        pools[6] = [names[0].upper()]
        pools[7] = [names[1].upper()]
        pools[8] = [names[2].upper()]
        pools[9] = [fl[int(r() * len(fl))]]
        pools[10] = [fl[int(r() * len(fl))]]
        nouns, adjectives = pools[_SLOT_INDEX["n"]], pools[_SLOT_INDEX["a"]]
        pools[11] = [nouns[int(r() * len(nouns))]]
        pools[12] = [nouns[int(r() * len(nouns))]]
        pools[13] = [nouns[int(r() * len(nouns))]]
        pools[14] = [adjectives[int(r() * len(adjectives))]]
        plural = is_plural(ent)
        pools[15] = ["" if plural else "s"]
        pools[16] = ["are" if plural else "is"]
        pools[17] = ["do" if plural else "does"]
        pools[18] = pools[_SLOT_INDEX["v" if plural else "v3"]]  # as long as each other: the same draws
        pools[19] = pools[_SLOT_INDEX["vt" if plural else "vt3"]]
        self.pools = pools
        self.entity = ent
        self.Entity = cap

    def render(self, tpl: _Tpl) -> str:
        # The hot path of composing: a comprehension over the slots, no per-slot branch unless needed.
        fmt, kinds, live, _ = tpl
        r = self.r
        pools = self.pools
        if not live:
            return fmt % tuple([(p := pools[k])[int(r() * len(p))] for k in kinds])
        values = []
        for k in kinds:
            p = pools[k]
            value = p[int(r() * len(p))]
            values.append(self.render(value) if k >= _FIRST_LIVE_PHRASE else value)
        return fmt % tuple(values)

    def sentence(self, tpl: _Tpl) -> str:
        """`render`, with the first letter capitalised (a template may open with a phrase)."""
        text = self.render(tpl)
        return text[0].upper() + text[1:] if tpl[3] and text[:1].islower() else text

    def fill(self, tpls: tuple[_Tpl, ...]) -> str:
        return self.sentence(tpls[int(self.r() * len(tpls))])

    def order(self, n: int) -> tuple[int, int]:
        """(start, step) of a cheap pseudo-random permutation of range(n)."""
        steps = _STEPS.get(n)
        if steps is None:
            steps = _STEPS[n] = tuple(k for k in range(1, max(n, 2)) if math.gcd(k, n) == 1) or (1,)
        r = self.r
        return int(r() * n), steps[int(r() * len(steps))]

    def fill_marks(self, text: str) -> str:
        """`text` with each local slot's mark replaced by this writing's value."""
        pools = self.pools
        if _MARKS_RE.search(self.entity):  # an entity of control characters: one pass, so none is replaced twice
            return _MARKS_RE.sub(lambda m: pools[ord(m.group()) - _MARK_BASE][0], text)
        for i in _MARKED_SLOTS:
            text = text.replace(chr(_MARK_BASE + i), pools[i][0])
        return text

    def pick(self, seq: Sequence) -> Any:
        return seq[int(self.r() * len(seq))]

    def word(self, slot: str) -> str:
        p = self.pools[_SLOT_INDEX[slot]]
        return p[int(self.r() * len(p))]
