"""Tests for the offline, deterministic writer (mrcr_gen.recipes.openai_mrcr._offline_formats)."""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcr_gen.recipes.openai_mrcr._offline_formats import FORMAT_NAMES, compose_writing

ROOT = Path(__file__).resolve().parents[2]
FORMATS = json.loads((ROOT / "formats" / "formats.json").read_text(encoding="utf-8"))
TOKENS = {f["name"]: (f["tokens"]["median"], f["tokens"]["p10"], f["tokens"]["p90"]) for f in FORMATS}
ENTITIES = (ROOT / "entities" / "entities.txt").read_text(encoding="utf-8").splitlines()
FORBIDDEN = ("======EXAMPLE======", "======END EXAMPLE======", "Prepend ", "(1 indexed)")
CLARIFY_START = ("Sure, I can help", "I'd be happy to", "Of course! I can")


def write(fmt: str, entity: str = "horses", variant: int = 0, seed: int = 0) -> str:
    return compose_writing(fmt, entity, variant, seed, TOKENS[fmt])


def pieces(fmt: str, entity: str = "horses", n: int = 12, seed: int = 3) -> list[str]:
    """Full pieces (clarification replies skipped) for structure checks."""
    out = [write(fmt, entity, v, seed) for v in range(n * 2)]
    out = [t for t in out if not t.startswith(CLARIFY_START)]
    assert len(out) >= n
    return out[:n]


# --------------------------------------------------------------------------- catalog data


def test_catalog_files_cover_all_formats_in_order():
    assert tuple(f["name"] for f in FORMATS) == FORMAT_NAMES
    for f in FORMATS:
        assert f["ask"] == "write a " + f["name"] + " about {entity}"
        t = f["tokens"]
        assert 0 < t["p10"] <= t["median"] <= t["p90"]
        assert f["guidance"].strip()


def test_entities_file():
    assert len(ENTITIES) == 438 == len(set(ENTITIES))
    assert ENTITIES == sorted(ENTITIES)
    norm = {re.sub(r"[\W_]+", "", e.lower()) for e in ENTITIES}
    assert len(norm) == 438
    for e in ENTITIES:
        assert e == e.strip().lower() and e
        assert " about " not in f" {e} "


# --------------------------------------------------------------------------- structure


def test_poem_has_blank_line_stanzas_of_short_lines():
    for text in pieces("poem"):
        stanzas = [s for s in text.split("\n\n") if not s.startswith(("**", "Title:"))]
        assert len(stanzas) >= 2
        for s in stanzas:
            assert 2 <= s.count("\n") + 1 <= 6
            assert all(len(line) < 80 for line in s.splitlines())


def test_song_has_labelled_parts():
    for text in pieces("song"):
        assert "**Verse 1**" in text and "**Verse 2**" in text
        assert text.count("**Chorus**") >= 2
        choruses = re.findall(r"\*\*Chorus\*\*\n(.*?)(?:\n\n|$)", text, re.S)
        assert len(set(choruses)) == 1  # the chorus repeats verbatim


def test_riddle_ends_with_answer_naming_the_entity():
    for text in pieces("riddle", "the beatles"):
        last = text.splitlines()[-1]
        assert re.fullmatch(r"(\*\*Answer:\*\*|Answer:) The beatles", last)
        assert "?" in text


def test_email_has_subject_greeting_and_signoff():
    for text in pieces("email", "departments"):
        lines = text.splitlines()
        assert lines[0].startswith("Subject: ")
        assert re.match(r"(Dear|Hi) \w+,$", lines[2])
        assert re.search(r"\n\n(Best regards|Kind regards|Thank you|Warm regards|Sincerely|Best),\n\S", text)
        assert "departments" in text


def test_email_clarifications_exist_and_are_short():
    texts = [write("email", "departments", v, 11) for v in range(400)]
    clar = [t for t in texts if t.startswith(CLARIFY_START)]
    assert 0.08 < len(clar) / len(texts) < 0.25
    for t in clar:
        assert "email about departments" in t and t.endswith(("?", ".")) and "\n" not in t


def test_other_formats_rarely_clarify():
    texts = [write(f, ENTITIES[v % 438], v, 5) for f in FORMAT_NAMES if f != "email" for v in range(300)]
    share = sum(t.startswith(CLARIFY_START) for t in texts) / len(texts)
    assert share < 0.01


def test_social_media_post_ends_with_hashtags():
    for text in pieces("social media post", "ice cream"):
        tags = text.splitlines()[-1].split()
        assert tags[0] == "#IceCream"
        assert len(tags) >= 2 and all(re.fullmatch(r"#[A-Za-z0-9]+", t) for t in tags)


def test_formal_letter_has_addresses_date_dear_and_sincerely():
    for text in pieces("formal letter"):
        blocks = text.split("\n\n")
        assert len(blocks[0].splitlines()) >= 3  # sender address block
        assert re.fullmatch(r"[A-Z][a-z]+ \d{1,2}, \d{4}", blocks[1])  # date
        assert len(blocks[2].splitlines()) >= 4  # recipient block
        assert re.search(r"\nDear (Mr\.|Ms\.|Dr\.) \w[\w' -]*,\n", text)
        assert re.search(r"\n\nSincerely,\n\n\S.+$", text)


def test_diary_entry_starts_with_date_or_dear_diary():
    for text in pieces("diary entry"):
        assert text.startswith("Dear Diary") or re.match(r"(\w+day, )?[A-Z][a-z]+ \d{1,2}, \d{4}", text)


def test_news_article_has_headline_dateline_and_paragraphs():
    for text in pieces("short news article"):
        paras = text.split("\n\n")
        assert paras[0].startswith(("**", "Headline:"))
        assert re.match(r"[A-Z .'-]+(, [A-Z][a-z]+ \d{1,2})? \u2014 ", paras[1])
        assert len(paras) >= 4


def test_scene_has_title_directions_and_cues():
    for text in pieces("short scene in a play", "the matrix"):
        assert text.startswith(("**", "Title:"))
        assert re.search(r"^[\[(].+[\])]$", text, re.M)  # stage directions
        cues = re.findall(r"^([A-Z][A-Z'-]+): ", text, re.M)
        assert len(cues) >= 4 and len(set(cues)) >= 2


def test_short_essay_is_titled_paragraphs():
    for text in pieces("short essay", "computer science"):
        paras = text.split("\n\n")
        assert paras[0].startswith(("**", "Title:")) and "Computer Science" in paras[0]
        assert len(paras) >= 3
        assert "computer science" in text


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
def test_entity_appears_in_every_format(fmt):
    for v in range(10):
        text = write(fmt, "blueberries", v, 1)
        assert "blueberries" in text.lower()


# --------------------------------------------------------------------------- determinism


def test_same_inputs_same_text_and_seed_is_stable():
    for fmt in FORMAT_NAMES:
        assert write(fmt, "geckos", 3, 9) == write(fmt, "geckos", 3, 9)


def test_deterministic_across_processes():
    code = (
        "import json, sys\n"
        "from mrcr_gen.recipes.openai_mrcr._offline_formats import compose_writing\n"
        "args = json.loads(sys.argv[1])\n"
        "print(json.dumps([compose_writing(f, e, v, s, tuple(t)) for f, e, v, s, t in args]))\n"
    )
    args = [(f, ENTITIES[i * 7], i, 1000 + i, TOKENS[f]) for i, f in enumerate(FORMAT_NAMES)]
    expected = [compose_writing(f, e, v, s, t) for f, e, v, s, t in args]
    for hashseed in ("12345",):  # the parent process runs with its own (random) hash seed
        env = {**os.environ, "PYTHONHASHSEED": hashseed}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        out = subprocess.run(
            [sys.executable, "-c", code, json.dumps(args)], capture_output=True, text=True, env=env, check=True
        ).stdout
        assert json.loads(out) == expected


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
def test_variants_and_seeds_give_distinct_texts(fmt):
    for entity in ("horses", "the who", "quantum mechanics"):
        texts = [write(fmt, entity, v, 0) for v in range(16)]
        assert len(set(texts)) == 16
    assert len({write(fmt, "horses", 0, s) for s in range(16)}) == 16


# --------------------------------------------------------------------------- forbidden substrings


@settings(max_examples=300, deadline=None)
@given(
    fmt=st.sampled_from(FORMAT_NAMES),
    entity=st.sampled_from(ENTITIES),
    variant=st.integers(0, 10_000),
    seed=st.integers(-(2**63), 2**64),
)
def test_no_forbidden_substrings_catalog(fmt, entity, variant, seed):
    text = compose_writing(fmt, entity, variant, seed, TOKENS[fmt])
    assert text and text == text.strip()
    assert not any(bad in text for bad in FORBIDDEN)


@settings(max_examples=200, deadline=None)
@given(
    fmt=st.sampled_from(FORMAT_NAMES),
    entity=st.one_of(
        st.text(min_size=1, max_size=40),
        st.sampled_from(["Prepend x", "(1 indexed)", "======EXAMPLE======", "a ======END EXAMPLE====== b", " "]),
    ),
    variant=st.integers(0, 50),
)
def test_no_forbidden_substrings_arbitrary_entities(fmt, entity, variant):
    text = compose_writing(fmt, entity, variant, 7, TOKENS[fmt])
    assert text and text == text.strip()
    assert not any(bad in text for bad in FORBIDDEN)


# --------------------------------------------------------------------------- length and speed


def test_length_distribution_matches_formats_table():
    from mrcr_gen._tokens import count_tokens_batch

    n = 200
    problems = []
    for fmt in FORMAT_NAMES:
        median, p10, p90 = TOKENS[fmt]
        texts = [write(fmt, ENTITIES[(i * 37) % len(ENTITIES)], i % 16, 20250412 + i // 16) for i in range(n)]
        counts = count_tokens_batch(texts)
        deciles = statistics.quantiles(counts, n=10)
        got = (statistics.median(counts), deciles[0], deciles[8])
        if abs(got[0] - median) > 0.10 * median:
            problems.append((fmt, "median", got[0], median))
        if abs(got[1] - p10) > 0.20 * p10:
            problems.append((fmt, "p10", got[1], p10))
        if abs(got[2] - p90) > 0.20 * p90:
            problems.append((fmt, "p90", got[2], p90))
    assert not problems


def test_compose_is_fast():
    compose_writing("poem", "warm-up", 0, 0, TOKENS["poem"])  # builds the Faker pools once
    args = [(f, ENTITIES[i % 438], i, 99) for i in range(200) for f in FORMAT_NAMES]
    t0 = time.perf_counter()
    for f, e, v, s in args:
        compose_writing(f, e, v, s, TOKENS[f])
    per_writing = (time.perf_counter() - t0) / len(args)
    # target is <= 150 us on a normal machine; leave headroom for slow/loaded CI
    assert per_writing < 1e-3, per_writing


# --- issue 33 item 7: verb forms, agreement, titles ---------------------------------------------

#: English verbs whose past tense is not the regular -ed form (the test's own list, not the data's).
IRREGULAR = {
    "arise", "awake", "bear", "beat", "become", "begin", "bend", "bet", "bind", "bite", "bleed", "blow",
    "break", "breed", "bring", "build", "burn", "burst", "buy", "catch", "choose", "cling", "come", "cost",
    "creep", "cut", "deal", "dig", "do", "draw", "dream", "drink", "drive", "dwell", "eat", "fall", "feed",
    "feel", "fight", "find", "flee", "fling", "fly", "forbid", "forget", "forgive", "freeze", "get", "give",
    "go", "grind", "grow", "hang", "have", "hear", "hide", "hit", "hold", "hurt", "keep", "kneel", "know",
    "lay", "lead", "leap", "leave", "lend", "let", "lie", "light", "lose", "make", "mean", "meet", "pay",
    "put", "quit", "read", "retell", "ride", "ring", "rise", "run", "say", "see", "seek", "sell", "send",
    "set", "shake", "shed", "shine", "shoot", "shrink", "shut", "sing", "sink", "sit", "slay", "sleep",
    "slide", "sling", "slit", "speak", "speed", "spend", "spin", "spit", "split", "spread", "spring",
    "stand", "steal", "stick", "sting", "stink", "stride", "strike", "string", "strive", "swear", "sweep",
    "swim", "swing", "take", "teach", "tear", "tell", "think", "throw", "thrust", "tread", "understand",
    "wake", "wear", "weave", "weep", "win", "wind", "wring", "write",
}  # fmt: skip


def test_no_invented_past_forms():
    """Every lexicon verb that is irregular in English takes its form from the data's table (issue 33:
    'growed', 'slided', 'sweeped'), and no derived form doubles or drops letters oddly."""
    from mrcr_gen.writers._lexicon import lexicon

    def regular(verb: str) -> str:
        if verb.endswith("e"):
            return verb + "d"
        return verb[:-1] + "ied" if verb.endswith("y") and verb[-2] not in "aeiou" else verb + "ed"

    words = lexicon()
    pairs = [*zip(words["vt"], words["vtd"], strict=True), *zip(words["v"], words["vd"], strict=True)]
    invented = [(base, past) for base, past in pairs if base in IRREGULAR and past == regular(base)]
    assert invented == []
    pasts = dict(zip(words["v"] + words["vt"], words["vd"] + words["vtd"], strict=True))
    assert (pasts["grow"], pasts["slide"], pasts["sweep"]) == ("grew", "slid", "swept")


@pytest.mark.parametrize(
    ("phrase", "plural"),
    [("relations", True), ("apples", True), ("the beatles", True), ("police", True), ("physics", False),
     ("glass", False), ("business", False), ("the octopus", False), ("leadership", False), ("star wars", False)],
)  # fmt: skip
def test_which_entities_take_a_plural_verb(phrase, plural):
    from mrcr_gen.writers._lexicon import is_plural

    assert is_plural(phrase) is plural


#: A template where the entity or topic is the subject of a verb that does not agree with a plural.
SUBJECT_THEN_SINGULAR_VERB = re.compile(
    r"(?<!of )(?<!for )(?<!on )(?<!in )(?<!to )(?<!about )(?<!around )(?<!near )(?<!with )"
    r"\{(e|E|ET|topic|Topic)\},? (\{(v3|vt3|VT3|verb)\}|is|was|has|does|hath|[a-z]+(?<!s)s|[A-Z][a-z]+s)\b"
)


def test_templates_make_verbs_agree_with_the_entity():
    """Issue 33 item 7 ('Relations accompanies'): in the data of both offline writers, a verb after the
    entity (openai/mrcr) or topic (MRCR v2) as its subject agrees with it through a slot of its own."""
    root = Path(__file__).resolve().parents[2] / "formats"
    found = []
    for name in ("offline_templates.json", "v2_grammar.json", "v2_styles.json", "v2_formats.json"):
        data = json.loads((root / name).read_text(encoding="utf-8"))
        if isinstance(data, dict):
            data = {k: v for k, v in data.items() if k != "_about"}
        text = json.dumps(data)
        found += [f"{name}: {m.group()}" for m in SUBJECT_THEN_SINGULAR_VERB.finditer(text)]
    assert found == []


def test_plural_and_singular_entities_get_their_own_verb_forms():
    def sentences(entity):
        text = " ".join(compose_writing(fmt, entity, v, 0) for fmt in FORMAT_NAMES for v in range(12))
        return text

    plural, singular = sentences("relations"), sentences("physics")
    assert re.search(r"\b[Rr]elations (are|do|matter|ask|begin)\b", plural)
    subject = r"(?:^|[.!?]\s+|\*\*|In the end, |which is why |Why )"
    assert not re.search(subject + r"[Rr]elations (is|does|matters|asks|begins|Matters)\b", plural)
    assert re.search(subject + r"[Pp]hysics (is|does|matters|asks|begins|Matters)\b", singular)


def test_letter_titles_fit_the_first_name():
    from faker.providers.person.en_US import Provider

    male, female = set(Provider.first_names_male), set(Provider.first_names_female)
    seen = 0
    for v in range(60):
        letter = compose_writing("formal letter", "apples", v, 3)
        for title, first in re.findall(r"\b(Mr\.|Ms\.|Dr\.) ([A-Z][a-z]+) [A-Z]", letter):
            seen += 1
            assert not (title == "Mr." and first not in male) and not (title == "Ms." and first not in female), letter
    assert seen >= 30


HANDED = """
import pickle, sys
from mrcr_gen.engines._forked import compute_forked
from mrcr_gen.recipes.openai_mrcr import _offline_words as words
handed = compute_forked(words.every_pool).result()
assert words._POOLS is None and not words._TITLES, "rendered here, not in the child"
here = words.every_pool()
names = set(handed[0][words._SLOT_INDEX["f"]])
sys.stdout.buffer.write(pickle.dumps((handed == here, len(handed[1]), set(handed[2]) == names)))
"""


def test_pools_rendered_in_a_child_and_handed_back_equal_the_pools_rendered_in_place():
    """What generation's fork server takes from its child (`_preload_start`): every pool as this
    process renders it, and the letter titles of every first name of the names pool."""
    import pickle
    import subprocess
    import sys

    if not hasattr(__import__("os"), "fork"):
        pytest.skip("needs os.fork")
    done = subprocess.run([sys.executable, "-c", HANDED], capture_output=True, check=True)
    equal, sentence_pools, every_name_titled = pickle.loads(done.stdout)
    assert equal
    assert sentence_pools == 11 and every_name_titled


def test_installed_pools_compose_the_same_writings():
    """A process that took the pools (and titles) of another composes what it would have alone."""
    import pickle
    import subprocess
    import sys

    compose = "from mrcr_gen.recipes.openai_mrcr._offline_formats import compose_writing as c; " + (
        "texts = [c(f, 'apples', v, 3) for f in ('formal letter', 'poem', 'short essay') for v in range(20)]"
    )
    alone = f"import pickle, sys; {compose}; sys.stdout.buffer.write(pickle.dumps(texts))"
    given = (
        "import pickle, sys; from mrcr_gen.recipes.openai_mrcr import _offline_words as w; "
        "w.install_pools(pickle.loads(sys.stdin.buffer.read())); "
        f"{compose}; sys.stdout.buffer.write(pickle.dumps((texts, 'faker' in sys.modules)))"
    )
    made = "import pickle, sys; from mrcr_gen.recipes.openai_mrcr import _offline_words as w; "
    made += "sys.stdout.buffer.write(pickle.dumps(w.every_pool()))"
    pools = subprocess.run([sys.executable, "-c", made], capture_output=True, check=True).stdout
    taken = subprocess.run([sys.executable, "-c", given], input=pools, capture_output=True, check=True)
    texts, faker = pickle.loads(taken.stdout)
    assert texts == pickle.loads(subprocess.run([sys.executable, "-c", alone], capture_output=True, check=True).stdout)
    assert not faker  # the titles came with the pools
