"""The offline writers' lexicon: the word lists of `formats/lexicon.json`, with the inflected forms a
grammar needs (plurals, third person, past tense, "a"/"an") derived once, so composing a writing only
picks from ready lists. Shared by every recipe's offline writer."""

from __future__ import annotations

import functools
import json

from .._paths import _data_dir

_VOWEL_SOUND = ("a", "e", "i", "o", "u", "hon")
_SIBILANT = ("s", "sh", "ch", "x", "z", "o")


def _article(word: str) -> str:
    return ("an " if word.startswith(_VOWEL_SOUND) and not word.startswith(("uni", "use", "eu")) else "a ") + word


def _third_person(verb: str) -> str:
    if verb.endswith("y") and verb[-2:-1] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + ("es" if verb.endswith(_SIBILANT) else "s")


def _past(verb: str, irregular: dict[str, str]) -> str:
    if verb in irregular:
        return irregular[verb]
    if verb.endswith("e"):
        return verb + "d"
    if verb.endswith("y") and verb[-2:-1] not in "aeiou":
        return verb[:-1] + "ied"
    return verb + "ed"


def _plural(noun: str, irregular: dict[str, str]) -> str:
    if noun in irregular:
        return irregular[noun]
    if noun.endswith("y") and noun[-2:-1] not in "aeiou":
        return noun[:-1] + "ies"
    return noun + ("es" if noun.endswith(("s", "sh", "ch", "x", "z")) else "s")


@functools.cache
def _number_exceptions() -> tuple[frozenset[str], frozenset[str]]:
    data = json.loads((_data_dir("formats") / "lexicon.json").read_text(encoding="utf-8"))
    return frozenset(data["singular_ending_in_s"]), frozenset(data["plural_without_s"])


@functools.cache
def is_plural(phrase: str) -> bool:
    """Whether a noun phrase (an entity, a topic) takes a plural verb: its last word ends in s (not
    ss), unless `formats/lexicon.json` lists the phrase as singular, or the phrase is listed plural."""
    singular, plural = _number_exceptions()
    key = phrase.strip().lower()
    if key in plural:
        return True
    return key.endswith("s") and not key.endswith("ss") and key not in singular


@functools.cache
def lexicon() -> dict[str, tuple[str, ...]]:
    """Word lists by slot name: `n` nouns, `ns` their plurals, `an` nouns with their article, `a`
    adjectives, `aa` adjectives with their article, `vt`/`vt3`/`vtd` transitive verbs (base, third
    person, past), `v`/`v3`/`vd` intransitive ones, `d` adverbs (`D` capitalised), `pr` prepositions,
    `op` sentence openers, `dt` determiners, `pe` people (neighbor, cousin, ...), `A`/`N` capitalised
    adjectives and nouns."""
    data = json.loads((_data_dir("formats") / "lexicon.json").read_text(encoding="utf-8"))
    past, plural = data["past_tense"], data["plural"]
    nouns, adjectives = data["nouns"], data["adjectives"]
    transitive, intransitive, adverbs = data["transitive_verbs"], data["intransitive_verbs"], data["adverbs"]
    words = {
        "n": nouns,
        "ns": [_plural(w, plural) for w in nouns],
        "an": [_article(w) for w in nouns],
        "a": adjectives,
        "aa": [_article(w) for w in adjectives],
        "vt": transitive,
        "vt3": [_third_person(w) for w in transitive],
        "vtd": [_past(w, past) for w in transitive],
        "v": intransitive,
        "v3": [_third_person(w) for w in intransitive],
        "vd": [_past(w, past) for w in intransitive],
        "d": adverbs,
        "D": [w.capitalize() for w in adverbs],
        "pr": data["prepositions"],
        "op": data["openers"],
        "dt": data["determiners"],
        "pe": data["people"],
        "A": [w.capitalize() for w in adjectives],
        "N": [w.capitalize() for w in nouns],
    }
    return {name: tuple(values) for name, values in words.items()}
