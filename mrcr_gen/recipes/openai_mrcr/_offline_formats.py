"""The offline writer's formats: one composer per MRCR format (poem, song, short essay, ...) over the
vocabulary, templates and length model of `_offline_words`, and `compose_writing`, their entry point."""

from __future__ import annotations

import re
from collections.abc import Callable

from ..._seeding import derived_rng
from ._offline_words import (
    _CHARS_PER_TOKEN,
    _CLARIFY,
    _CLARIFY_END,
    _CLARIFY_FIRST,
    _CLARIFY_FIRST_GENERIC,
    _CLARIFY_GENERIC,
    _CLARIFY_MORE,
    _DEFAULT_CPT,
    _DIARY_BODY,
    _DIARY_CLOSE,
    _DIARY_OPEN,
    _EMAIL_BODY,
    _EMAIL_CLOSE,
    _EMAIL_OPEN,
    _EMAIL_SUBJECT,
    _EMOJI,
    _ESSAY_BODY,
    _ESSAY_CLOSE,
    _ESSAY_OPEN,
    _ESSAY_TITLES,
    _LETTER_BODY,
    _NEWS_BODY,
    _NEWS_CLOSE,
    _NEWS_LEAD,
    _NEWS_QUOTE,
    _NEWS_TITLES,
    _POEM_LINE,
    _POEM_TITLES,
    _RIDDLE_ASK,
    _RIDDLE_LINE,
    _SCENE_DIRECTION,
    _SCENE_END,
    _SCENE_LINE,
    _SCENE_SETTING,
    _SCENE_TITLES,
    _SOCIAL_BODY,
    _SOCIAL_OPEN,
    _SONG_LINE,
    FORMAT_NAMES,
    _Ctx,
    _length_plan,
    _SentencePool,
    sample_target_tokens,
    titles_for,
)


def _fill_sentences(
    ctx: _Ctx,
    pool: _SentencePool,
    budget: float,
    min_count: int = 1,
    sep: int = 1,
) -> list[str]:
    """Sentences from ``pool`` (visited in a random cyclic order, so none repeats within
    a writing) until their joined length is closest to ``budget``."""
    out: list[str] = []
    n = 0
    sentences = pool.sentences()
    size = len(sentences)
    pos, step = ctx.order(size)
    while True:
        s = sentences[pos]
        pos = (pos + step) % size
        ln = len(s) + sep
        if len(out) >= min_count and n + ln > budget and (n + ln - budget) > (budget - n):
            break
        out.append(s)
        n += ln
        if len(out) > 400:
            break
    return out


def _paragraphs(ctx: _Ctx, sentences: list[str], lo: int = 3, hi: int = 5) -> list[str]:
    paras, i, r = [], 0, ctx.r
    while i < len(sentences):
        k = lo + int(r() * (hi - lo + 1))
        paras.append(" ".join(sentences[i : i + k]))
        i += k
    # avoid a dangling one-sentence paragraph
    if len(paras) > 1 and paras[-1].count(". ") == 0 and len(paras[-1]) < 90:
        tail = paras.pop()
        paras[-1] = paras[-1] + " " + tail
    return paras


def _end_line(line: str) -> str:
    return line.rstrip(",;") + "."


# --------------------------------------------------------------------------- #
# Per-format composers: (ctx, target_chars) -> text
# --------------------------------------------------------------------------- #


def _poem(ctx: _Ctx, target: float) -> str:
    title = ctx.fill(_POEM_TITLES) if ctx.r() < 0.8 else ""
    budget = target - (len(title) + 2 if title else 0)
    lines = _fill_sentences(ctx, _POEM_LINE, budget * 0.97, min_count=4)
    stanzas, i, r = [], 0, ctx.r
    size = 4 if r() < 0.7 else 3 + int(r() * 3)
    while i < len(lines):
        chunk = lines[i : i + size]
        chunk[0] = chunk[0][:1].upper() + chunk[0][1:]
        chunk[-1] = _end_line(chunk[-1])
        stanzas.append("\n".join(chunk))
        i += size
    if len(stanzas) > 1 and stanzas[-1].count("\n") == 0:
        last = stanzas.pop()
        stanzas[-1] = stanzas[-1][:-1] + ",\n" + last
    body = "\n\n".join(stanzas)
    return f"{title}\n\n{body}" if title else body


def _song(ctx: _Ctx, target: float) -> str:
    r = ctx.r
    title = ctx.fill(_POEM_TITLES).replace("Ode to", "Ballad of") if r() < 0.7 else ""
    chorus = "\n".join(ctx.pick(_SONG_LINE.sentences()) for _ in range(4))
    bridge = "\n".join(ctx.pick(_SONG_LINE.sentences()) for _ in range(2 + int(r() * 2)))
    outro = "\n".join(ctx.pick(_SONG_LINE.sentences()) for _ in range(2))
    n_verses = 2 if target < 1700 else 3
    fixed = (len(title) + 2 if title else 0) + (n_verses + 1) * (len(chorus) + 16) + len(bridge) + 14 + len(outro) + 13
    per_verse = max(60.0, (target - fixed) / n_verses)
    verses = ["\n".join(_fill_sentences(ctx, _SONG_LINE, per_verse - 14, min_count=2)) for _ in range(n_verses)]
    parts = [title] if title else []
    for i, v in enumerate(verses):
        parts.append(f"**Verse {i + 1}**\n{v}")
        parts.append(f"**Chorus**\n{chorus}")
        if i == 1:
            parts.append(f"**Bridge**\n{bridge}")
    parts.append(f"**Outro**\n{outro}")
    return "\n\n".join(parts)


def _essay(ctx: _Ctx, target: float) -> str:
    title = ctx.fill(_ESSAY_TITLES)
    opening = ctx.fill(_ESSAY_OPEN)
    closing = ctx.fill(_ESSAY_CLOSE)
    budget = target - len(title) - len(opening) - len(closing) - 8
    body = _fill_sentences(ctx, _ESSAY_BODY, budget, min_count=3)
    paras = _paragraphs(ctx, [opening, *body], 3, 5)
    paras[-1] = paras[-1] + " " + closing if ctx.r() < 0.4 else paras[-1]
    if not paras[-1].endswith(closing):
        paras.append(closing)
    return title + "\n\n" + "\n\n".join(paras)


def _news(ctx: _Ctx, target: float) -> str:
    title = ctx.fill(_NEWS_TITLES)
    city = ctx.word("c").upper()
    dateline = f"{city} \u2014 " if ctx.r() < 0.6 else f"{city}, {ctx.word('m')} {ctx.word('day')} \u2014 "
    lead = dateline + ctx.fill(_NEWS_LEAD)
    close = ctx.fill(_NEWS_CLOSE)
    budget = target - len(title) - len(lead) - len(close) - 8
    body = _fill_sentences(ctx, _NEWS_BODY, budget * 0.8, min_count=2)
    quotes = _fill_sentences(ctx, _NEWS_QUOTE, budget * 0.2, min_count=1)
    paras = [lead]
    r = ctx.r
    i = 0
    while i < len(body):
        k = 2 + int(r() * 2)
        paras.append(" ".join(body[i : i + k]))
        i += k
        if quotes:
            paras.append(quotes.pop())
    paras.extend(quotes)
    paras.append(close)
    return title + "\n\n" + "\n\n".join(paras)


def _email(ctx: _Ctx, target: float) -> str:
    subject = ctx.fill(_EMAIL_SUBJECT)
    greet_name = ctx.word("f") if ctx.r() < 0.6 else "Team"
    greeting = ("Dear " if ctx.r() < 0.5 else "Hi ") + greet_name + ","
    opening = ctx.fill(_EMAIL_OPEN)
    sender = ctx.word("F")
    sign = f"{ctx.pick(_EMAIL_CLOSE)}\n{sender}\n{ctx.word('j')}\n{ctx.word('C')}"
    budget = target - len(subject) - len(greeting) - len(opening) - len(sign) - 8
    body = _fill_sentences(ctx, _EMAIL_BODY, budget, min_count=2)
    paras = _paragraphs(ctx, [opening, *body], 2, 4)
    return f"{subject}\n\n{greeting}\n\n" + "\n\n".join(paras) + f"\n\n{sign}"


def _hashtag(text: str) -> str:
    return "#" + "".join(w[:1].upper() + w[1:] for w in re.split(r"[^A-Za-z0-9]+", text) if w)


def _social(ctx: _Ctx, target: float) -> str:
    r = ctx.r
    emoji = r() < 0.6
    opening = ctx.fill(_SOCIAL_OPEN)
    tags = [_hashtag(ctx.entity)]
    for _ in range(2 + int(r() * 4)):
        t = _hashtag(ctx.word("n"))
        if t not in tags:
            tags.append(t)
    tagline = " ".join(tags)
    budget = target - len(opening) - len(tagline) - 4
    body = _fill_sentences(ctx, _SOCIAL_BODY, budget, min_count=1)
    text = opening + "\n\n" + " ".join(body) + "\n\n" + tagline
    if not emoji:
        for e in _EMOJI:
            if e in text:
                text = text.replace(" " + e, "").replace(e, "")
    return text


def _diary(ctx: _Ctx, target: float) -> str:
    opening = ctx.fill(_DIARY_OPEN)
    close = ctx.fill(_DIARY_CLOSE) if ctx.r() < 0.8 else ""
    budget = target - len(opening) - len(close) - 4
    body = _fill_sentences(ctx, _DIARY_BODY, budget, min_count=3)
    paras = _paragraphs(ctx, body, 3, 5)
    text = opening + "\n\n" + "\n\n".join(paras)
    return text + "\n\n" + close if close else text


def _letter(ctx: _Ctx, target: float) -> str:
    w = ctx.word
    sender = w("F")
    sender_block = f"{sender}\n{w('addr')}\n{w('c')}, {w('st')} {w('zip')}\n{w('mail')}\n{w('phone')}"
    date = f"{w('m')} {w('day')}, {w('y')}"
    rec_last = w("l")
    drawn, first = ctx.r(), w("f")  # the title's draw first, as before names had titles of their own
    titles = titles_for(first)
    title = titles[int(drawn * len(titles))]
    recipient = f"{title} {first} {rec_last}\n{w('j')}\n{w('C')}\n{w('addr')}\n{w('c')}, {w('st')} {w('zip')}"
    dear = f"Dear {title} {rec_last},"
    subject = f"Subject: {ctx.fill(_EMAIL_SUBJECT)[9:]}" if ctx.r() < 0.3 else ""
    sign = f"Sincerely,\n\n{sender}"
    head = f"{sender_block}\n\n{date}\n\n{recipient}\n\n" + (subject + "\n\n" if subject else "") + dear
    budget = target - len(head) - len(sign) - 4
    body = _fill_sentences(ctx, _LETTER_BODY, budget, min_count=3)
    paras = _paragraphs(ctx, body, 2, 4)
    return head + "\n\n" + "\n\n".join(paras) + "\n\n" + sign


def _scene(ctx: _Ctx, target: float) -> str:
    r = ctx.r
    pools = ctx.pools
    c1, c2, c3 = pools[6][0], pools[7][0], pools[8][0]
    title = ctx.fill(_SCENE_TITLES)
    setting = ctx.fill(_SCENE_SETTING)
    end = ctx.pick(_SCENE_END)
    three = r() < 0.4
    has_chars = r() < 0.5
    chars = f"Characters:\n{c1}\n{c2}" + (f"\n{c3}" if three else "")
    head = title + "\n\n" + (chars + "\n\n" if has_chars else "") + setting
    budget = target - len(head) - len(end) - 4
    entrance = budget * (0.3 + 0.3 * r()) if three else budget * 2
    speakers = [c1, c2]
    out: list[str] = []
    n = 0
    lines = _SCENE_LINE.sentences()
    size = len(lines)
    pos, step = ctx.order(size)
    last = c2
    while True:
        if n >= entrance:
            s = f"({c3} enters, carrying the {ctx.word('n')}.)"
            speakers.append(c3)
            entrance = budget * 2
        elif r() < 0.12 and out:
            s = ctx.fill(_SCENE_DIRECTION)
        else:
            who = speakers[int(r() * len(speakers))] if len(speakers) > 2 else c1
            if who == last:
                who = speakers[(speakers.index(who) + 1) % len(speakers)]
            last = who
            s = who + ": " + lines[pos]
            pos = (pos + step) % size
        ln = len(s) + 2
        if len(out) >= 4 and n + ln > budget and (n + ln - budget) > (budget - n):
            break
        out.append(s)
        n += ln
    return head + "\n\n" + "\n\n".join(out) + "\n\n" + end


def _riddle(ctx: _Ctx, target: float) -> str:
    ask = ctx.pick(_RIDDLE_ASK)
    ans = ("Answer: " if ctx.r() < 0.7 else "**Answer:** ") + ctx.Entity
    budget = target - len(ask) - len(ans) - 4
    lines = _fill_sentences(ctx, _RIDDLE_LINE, budget, min_count=2)
    lines[0] = lines[0][:1].upper() + lines[0][1:]
    lines[-1] = _end_line(lines[-1])
    return "\n".join(lines) + "\n" + ask + "\n\n" + ans


def _clarify(ctx: _Ctx, format_name: str) -> str:
    first = ctx.pick(_CLARIFY.get(format_name, _CLARIFY_GENERIC))
    first = first.replace("{e}", ctx.entity).replace("{fmt}", format_name)
    parts = [first, ctx.pick(_CLARIFY_FIRST.get(format_name, _CLARIFY_FIRST_GENERIC))]
    if ctx.r() < 0.6:
        parts.append(ctx.pick(_CLARIFY_MORE))
    if ctx.r() < 0.6:
        parts.append(ctx.pick(_CLARIFY_END))
    return " ".join(parts)


_COMPOSERS: dict[str, Callable[[_Ctx, float], str]] = {
    "poem": _poem,
    "song": _song,
    "short essay": _essay,
    "short news article": _news,
    "email": _email,
    "social media post": _social,
    "diary entry": _diary,
    "formal letter": _letter,
    "short scene in a play": _scene,
    "riddle": _riddle,
}

__all__ = ["FORMAT_NAMES", "compose_writing", "sample_target_tokens"]

_FORBIDDEN = ("======EXAMPLE======", "======END EXAMPLE======", "Prepend ", "(1 indexed)")


def compose_writing(
    format_name: str,
    entity: str,
    variant: int,
    seed: int,
    tokens: tuple[int, int, int] = (400, 300, 500),
) -> str:
    """A synthetic writing answering ``write a {format_name} about {entity}``.

    ``tokens`` is the (median, p10, p90) o200k length of this format; the length of
    the result is drawn from a distribution with those quantiles.  Pure and
    deterministic per ``(seed, format_name, entity, variant, tokens)``.
    """
    rng = derived_rng("writing", int(seed), str(format_name), str(entity), int(variant))
    ctx = _Ctx(rng, entity)
    q = _length_plan(tuple(int(x) for x in tokens))[0]  # type: ignore[arg-type]
    if rng.random() < q:
        text = _clarify(ctx, format_name)
    else:
        target_chars = sample_target_tokens(rng, tokens) * _CHARS_PER_TOKEN.get(format_name, _DEFAULT_CPT)
        composer = _COMPOSERS.get(format_name, _essay)
        text = composer(ctx, target_chars)
    text = ctx.fill_marks(text).strip()
    for bad in _FORBIDDEN:  # entities are user data: never let them smuggle markers in
        if bad in text:
            text = text.replace(bad, bad.replace(" ", "\u00a0").replace("=", "-"))
    return text
