"""Offline, deterministic writer for MRCR haystack writings.

``compose_writing(format_name, entity, variant, seed, tokens)`` returns a synthetic
writing that answers the ask ``write a {format_name} about {entity}``.

Design notes
------------
* Determinism: every writing gets its own ``random.Random`` seeded from a blake2b
  digest of ``(seed, format_name, entity, variant)``; Python's salted ``hash()`` is
  never used, so the same inputs give the same text in every process.
* Speed: Faker is used once (lazily, on first use) to build vocabulary pools
  (parts of speech, names, cities, companies, addresses, jobs, ...).  Composition
  itself only draws from those pools with the per-writing RNG and fills
  pre-compiled sentence templates, so no Faker call happens per writing.
* Length: the target o200k token count is drawn from a distribution whose
  10th/50th/90th percentiles match ``tokens=(median, p10, p90)`` (a split
  log-normal; formats whose p10 is far below the median are modelled as a mix of
  short clarification replies and full pieces).  The writer cannot tokenize, so it
  converts the target to characters with a per-format calibrated
  characters-per-token ratio and stops adding sentences/lines when closest to it.
"""

from __future__ import annotations

import math
import random
import re
import threading
from collections.abc import Callable, Sequence

from .._seeding import derived_rng

__all__ = [
    "FORMAT_NAMES",
    "compose_writing",
    "sample_target_tokens",
]

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
# (measured over a few thousand writings; see tests/writers/test_offline.py).
_CHARS_PER_TOKEN: dict[str, float] = {
    "poem": 4.67,
    "song": 4.5,
    "short essay": 5.3,
    "short news article": 5.2,
    "email": 5.1,
    "social media post": 4.66,
    "diary entry": 4.6,
    "formal letter": 4.86,
    "short scene in a play": 3.73,
    "riddle": 4.18,
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
    a = (-3.969683028665376e01, 2.209460984245205e02, -2.759285104469687e02,
         1.383577518672690e02, -3.066479806614716e01, 2.506628277459239e00)
    b = (-5.447609879822406e01, 1.615858368580409e02, -1.556989798598866e02,
         6.680131188771972e01, -1.328068155288572e01)
    c = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e00,
         -2.549671509763030e00, 4.374664141464968e00, 2.938163982698783e00)
    d = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e00,
         3.754408661907416e00)
    if p < 0.02425:
        q = math.sqrt(-2 * math.log(p))
        return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / (
            (((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1)
    if p > 1 - 0.02425:
        return -_inv_norm(1 - p)
    q = p - 0.5
    r = q * q
    return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q / (
        ((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1)


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
# Vocabulary pools (built once from Faker)
# --------------------------------------------------------------------------- #

# Per-writing slots occupy the first indices of the pool list.
_LOCAL_SLOTS = ("e", "E", "ET", "p1", "p2", "p3", "P1", "P2", "P3", "me", "you")
_GLOBAL_SLOTS = (
    "a", "A", "n", "N", "v", "vt", "d", "f", "l", "F", "c", "C", "j", "m", "day", "y",
    "st", "addr", "zip", "phone", "mail", "emo", "wd", "tm", "place", "wx",
)
_SLOT_INDEX = {name: i for i, name in enumerate(_LOCAL_SLOTS + _GLOBAL_SLOTS)}
_N_LOCAL = len(_LOCAL_SLOTS)

_BAD_ADJ = {
    "every", "several", "used", "united", "pregnant", "able", "known", "various",
    "additional", "federal", "entire", "actual", "electrical", "other", "many",
    "much", "such", "own", "same", "few", "last", "next", "main", "former",
    "latter", "certain", "whole", "civil", "dead", "drunk", "sexual", "unable",
    "unlikely", "top", "total", "living", "legal", "illegal", "nuclear", "severe",
    "more", "some", "all", "most", "even", "just", "any", "each", "another", "still",
    "both", "sure", "enough", "less", "least", "left", "according", "worth", "due",
    "ago", "apart", "upstairs", "weekly", "downtown", "male", "female", "asleep", "ill",
    "gross", "nasty", "stupid", "sick", "mad", "guilty", "embarrassed", "sorry", "glad",
    "lower", "upper", "prior", "previous", "opposite", "double", "spare", "super",
    "afraid", "alive", "alone", "fit", "content", "past", "working", "junior", "senior",
}
_BAD_NOUN = {"thanks", "people", "sex", "death", "blood", "drug", "drugs", "gun",
             "weapon", "wife", "husband", "girlfriend", "boyfriend", "data"}
_BAD_VERB = {"be", "have", "do", "say", "get", "going", "mean", "seem", "need",
             "like", "want", "let", "put", "become", "use", "ask", "tell", "give",
             "go", "make", "take", "come", "keep", "call", "try", "may", "might",
             "will", "would", "shall", "should", "can", "could", "must"}

_TRANSITIVE = tuple("""accept achieve acquire adapt address admire adopt analyse answer appreciate
arrange assess attract avoid balance build capture carry celebrate change choose claim clean
collect compare complete consider create cross defend define deliver describe design develop
discover discuss earn embrace encourage enjoy examine expand explain explore express face fix
follow gather guide handle hold honor identify imagine improve include inspire join keep lead
learn lift manage measure mend mix notice observe offer open organize paint plan plant prepare
preserve protect prove question raise reach read rebuild recognize recover remember repair
represent reshape respect restore reveal review save seek share shape solve study support teach
test trace track trust understand value visit watch welcome""".split())
_INTRANSITIVE = tuple("""wait listen dream wander rest breathe grow laugh sing dance travel return
rise begin stay hope wonder remember learn change move pause smile shine drift search speak
write forgive improve adapt gather celebrate build listen reflect grow heal explore rest
connect""".split())

_MONTHS = ("January", "February", "March", "April", "May", "June", "July",
           "August", "September", "October", "November", "December")
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_TIMES = ("this morning", "this afternoon", "tonight", "after lunch", "before dinner",
          "on the way home", "at breakfast", "late in the evening", "around noon")
_PLACES = ("the library", "the park", "the kitchen", "the office", "the station",
           "the market", "the garden", "the old bridge", "the cafe on the corner",
           "the museum", "the harbor", "the school hall", "the community center")
_WEATHER = ("rainy", "sunny", "windy", "cloudy", "quiet", "cold", "warm", "grey",
            "bright", "foggy", "chilly", "humid")
_EMOJI = ("\u2728", "\U0001f31f", "\U0001f4a1", "\U0001f389", "\U0001f64c", "\u2764\ufe0f",
          "\U0001f60a", "\U0001f525", "\U0001f33f", "\U0001f4da", "\U0001f30d", "\U0001f44f")

_POOL_LOCK = threading.Lock()
_POOLS: list[list[str]] | None = None


def _clean(words: Sequence[str], bad: set[str]) -> list[str]:
    out, seen = [], set()
    for w in words:
        w = w.strip().lower()
        if w.isalpha() and len(w) > 2 and w not in bad and w not in seen:
            seen.add(w)
            out.append(w)
    return out


def _build_pools() -> list[list[str]]:
    from faker import Faker  # imported lazily: costs ~0.2 s once

    fake = Faker("en_US")
    fake.seed_instance(0x4D524352)  # fixed: pools depend only on the Faker version
    pos = fake.provider("faker.providers.lorem").parts_of_speech  # type: ignore[union-attr]
    adj = _clean(pos["adjective"], _BAD_ADJ)
    noun = _clean(pos["noun"], _BAD_NOUN)
    fverbs = set(_clean(pos["verb"], _BAD_VERB))
    # Faker's verb list mixes transitive and intransitive verbs; keep two curated
    # lists (Faker's words first) so "to {vt} the {n}" and "we {v}" read naturally.
    verb_t = [w for w in _TRANSITIVE if w in fverbs] + [w for w in _TRANSITIVE if w not in fverbs]
    verb_i = [w for w in _INTRANSITIVE if w in fverbs] + [w for w in _INTRANSITIVE if w not in fverbs]
    adv = [w for w in _clean(pos["adverb"], {"only", "daily", "early", "likely", "literally",
                                              "unfortunately", "hopefully", "basically",
                                              "hardly", "merely", "terribly"}) if w.endswith("ly")]
    first = sorted({fake.first_name() for _ in range(600)})
    last = sorted({fake.last_name() for _ in range(600)})
    pools: dict[str, list[str]] = {
        "a": adj,
        "A": [w.capitalize() for w in adj],
        "n": noun,
        "N": [w.capitalize() for w in noun],
        "v": verb_i,
        "vt": verb_t,
        "d": adv,
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
    out: list[list[str]] = [[""] for _ in _LOCAL_SLOTS]
    out.extend(pools[name] for name in _GLOBAL_SLOTS)
    return out


def _pools() -> list[list[str]]:
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
_Tpl = tuple[str, tuple[int, ...]]


def _compile(templates: Sequence[str]) -> tuple[_Tpl, ...]:
    out = []
    for t in templates:
        kinds = tuple(_SLOT_INDEX[m] for m in _SLOT_RE.findall(t))
        fmt = _SLOT_RE.sub("%s", t.replace("%", "%%"))
        out.append((fmt, kinds))
    return tuple(out)


_ESSAY_TITLES = _compile((
    "**Understanding {ET}**", "**Why {ET} Matters**", "**{ET} and the {A} {N}**",
    "**Reflections on {ET}**", "**The Role of {ET} in {A} Life**",
    "Title: The {A} World of {ET}", "**{ET}: Past, Present, and Future**",
    "**Rethinking {ET}**", "Title: {ET} and Everyday Life",
))
_ESSAY_OPEN = _compile((
    "{E} is one of those subjects that seems simple until you look closely.",
    "Few topics reveal as much about the way we live as {e}.",
    "From the smallest village to the largest city, {e} shapes how people {v} and {v}.",
    "Whenever people talk about {e}, they reveal something about their own values.",
    "In an age of constant change, {e} offers a surprisingly steady point of reference.",
    "It is easy to take {e} for granted, yet it touches almost every part of daily life.",
))
_ESSAY_BODY = _compile((
    "{E} has shaped the way we {v} and {v} in ways that are easy to overlook.",
    "At its core, {e} is about the relationship between the {n} and the {n}.",
    "Many scholars argue that {e} cannot be separated from the {a} {n} that surrounds it.",
    "Consider, for example, the role of the {n} in everyday life.",
    "When people think of {e}, they often imagine something {a} and {a}.",
    "Yet a closer look reveals a more complicated and more {a} picture.",
    "This tension between the {a} and the {a} is what makes {e} worth studying.",
    "Historically, {e} has been tied to questions of {n} and {n}.",
    "In many communities, {e} is a reminder that the {n} matters as much as the {n}.",
    "It encourages us to {vt} more carefully and to {v} with greater purpose.",
    "Critics point out that {e} can also be {a}, especially when the {n} is ignored.",
    "Even so, its influence on the {n} remains {d} strong.",
    "The lesson is simple: {e} rewards those who take the time to {v}.",
    "Without {e}, the {n} of modern life would look very different.",
    "One of the most {a} aspects of {e} is its connection to the {n}.",
    "Over time, this connection has grown stronger as people learned to {vt} the {n}.",
    "In schools, workplaces, and homes, {e} {d} plays a {a} role.",
    "Understanding {e} therefore requires both curiosity and patience.",
    "The {a} {n} offers a useful example of how this works in practice.",
    "Such examples show that {e} is not a fixed idea but a living one.",
    "Economists, artists, and teachers all describe {e} in their own terms.",
    "For some, it is a matter of {n}; for others, it is a question of {n}.",
    "Research on the {n} suggests that these effects are {d} measurable.",
    "Moreover, the way we talk about {e} influences how we {vt} it.",
    "This is why debates about {e} so often turn into debates about the {n}.",
    "Technology has changed the conversation, making the {n} more {a} than ever.",
    "At the same time, older traditions continue to give {e} its meaning.",
    "The challenge for the next generation will be to {vt} without losing sight of {e}.",
))
_ESSAY_CLOSE = _compile((
    "In conclusion, {e} is far more than it first appears: it is a lens through which we can {vt} the world.",
    "Ultimately, {e} reminds us that the {n} and the {n} are deeply connected.",
    "In the end, {e} asks us to {v} with care, and that may be its most {a} lesson.",
    "Taken together, these ideas show why {e} deserves our continued attention.",
))

_NEWS_TITLES = _compile((
    "**{ET} Takes Center Stage in {c}**", "**{c} Residents Rally Around {ET}**",
    "**New Study Sheds Light on {ET}**", "**{C} Unveils {A} Plan Focused on {ET}**",
    "Headline: {ET} Draws Record Interest Across {c}",
    "**Local Experts Weigh In on the Future of {ET}**",
    "**{ET} Festival Brings Crowds to Downtown {c}**",
))
_NEWS_LEAD = _compile((
    "{C} announced on {wd} a new initiative centered on {e}, a move officials say could reshape the {n} sector.",
    "Interest in {e} has surged this month, with residents and local organizations calling for more {a} programs.",
    "A report released this week suggests that {e} is playing a larger role in the local economy than previously believed.",
    "City leaders gathered on {wd} to discuss {e}, as concerns about the {n} continue to grow.",
))
_NEWS_BODY = _compile((
    "According to the report, the {a} {n} has been a major factor in recent changes.",
    "Officials said the program will begin in {m} and run through the end of the year.",
    "Organizers expect more than {day}00 participants to attend the first session.",
    "The announcement comes after months of debate over the {n} and its costs.",
    "Local businesses have {d} welcomed the plan, citing the need for {a} solutions.",
    "Some residents, however, remain skeptical about the timeline.",
    "The initiative will be funded in part by a grant from {C}.",
    "Experts note that {e} has long been linked to the {n} and the {n}.",
    "A public meeting is scheduled for next {wd} at {place}.",
    "Data from the past year show a {a} rise in demand related to {e}.",
    "Several schools have already expressed interest in joining the effort.",
    "The city council is expected to vote on the proposal later this month.",
    "Similar programs in other regions have produced {a} results.",
    "Volunteers will also help to {vt} the {n} in neighborhoods across {c}.",
    "Supporters say the plan could {vt} the way residents think about {e}.",
))
_NEWS_QUOTE = _compile((
    "\"This is about making {e} work for everyone,\" said {F}, {j} at {C}.",
    "\"We have seen a {a} response from the community,\" said {F}, who leads the project.",
    "\"People care about {e} more than ever,\" said {F}, a local resident.",
    "\"Our goal is to {vt} the {n} and give families more options,\" said {F}, {j}.",
    "\"It will take time, but the direction is clear,\" {F} told reporters.",
))
_NEWS_CLOSE = _compile((
    "More information is available on the city's website.",
    "Officials plan to release an update on the project in {m}.",
    "Residents can share feedback at the upcoming public meeting.",
))

_EMAIL_SUBJECT = _compile((
    "Subject: {ET} - Next Steps", "Subject: Update on {ET}", "Subject: Quick Question About {ET}",
    "Subject: Proposal Regarding {ET}", "Subject: {ET} Planning Meeting",
    "Subject: Follow-Up: {ET}", "Subject: Invitation to Discuss {ET}",
))
_EMAIL_OPEN = _compile((
    "I hope this email finds you well.", "I hope you are having a great week.",
    "Thank you for your time during our last meeting.", "I am writing to follow up on our conversation about {e}.",
    "I wanted to reach out regarding {e}.",
))
_EMAIL_BODY = _compile((
    "As you know, our team has been looking into {e} over the past few weeks.",
    "We believe there is a real opportunity to {vt} the {n} and improve our results.",
    "I have attached a short summary of the key points for your review.",
    "Could we schedule a brief call on {wd} to discuss the details?",
    "The {a} {n} we discussed is still a priority for the department.",
    "Please let me know if you have any questions or concerns about {e}.",
    "Our current timeline aims to finish the first phase by the end of {m}.",
    "{f} from the {n} team has offered to help with the planning.",
    "I would appreciate your feedback on the proposed approach.",
    "We would also like to invite you to share your own ideas about {e}.",
    "This should make it easier for everyone to {vt} the {n} going forward.",
    "If it would be helpful, I can prepare a more detailed plan before we meet.",
    "Thank you in advance for your support with this project.",
    "The budget for the {n} has been reviewed and approved in principle.",
))
_EMAIL_CLOSE = ("Best regards,", "Kind regards,", "Thank you,", "Warm regards,", "Sincerely,", "Best,")

_SOCIAL_OPEN = _compile((
    "Let's talk about {e}! {emo}", "Can we appreciate {e} for a minute? {emo}",
    "Today I learned something new about {e}. {emo}", "Big love for {e} today! {emo}",
    "Quick reminder: {e} deserves more attention. {emo}", "Who else is thinking about {e} today?",
    "Hot take: {e} makes everything better. {emo}",
))
_SOCIAL_BODY = _compile((
    "Whether you {v} every day or just now and then, there is always something new to discover.",
    "Spent the afternoon at {place} and could not stop thinking about {e}.",
    "It is amazing how the {a} {n} connects so many people.",
    "Share your favorite story about {e} in the comments!",
    "Tag someone who needs to hear this today. {emo}",
    "Small steps, {a} results.",
    "Sometimes the simplest things, like {e}, bring the most joy.",
    "Can't wait to {vt} more of this next week!",
    "Here's to {e} and everyone who makes it special.",
    "Drop a comment if you agree! {emo}",
    "Never underestimate the power of {e}.",
    "What does {e} mean to you?",
))

_DIARY_OPEN = _compile((
    "Dear Diary,", "{wd}, {m} {day}, {y}\n\nDear Diary,", "{m} {day}, {y}", "Dear Diary,\n\nWhat a day.",
))
_DIARY_BODY = _compile((
    "Today I could not stop thinking about {e}.",
    "It started {tm}, when {p1} mentioned {e} over coffee.",
    "I went to {place} and found myself wondering about the {n}.",
    "The weather was {wx}, which somehow matched my mood.",
    "I keep asking myself why {e} matters so much to me.",
    "Maybe it is because the {a} {n} reminds me of home.",
    "{p1} says I worry too much, and maybe that is true.",
    "Still, I feel like I am finally starting to {vt} things more clearly.",
    "I wrote a few notes about {e} so I will not forget them.",
    "Tomorrow I want to {v} a little more and complain a little less.",
    "It is strange how something like {e} can change a whole day.",
    "I laughed more than I have in weeks.",
    "Later, I called {p2}, and we talked for almost an hour.",
    "We agreed that the {n} is more {a} than it looks.",
    "Before bed, I made a list of things I am grateful for.",
    "At the top of the list, of course, was {e}.",
    "I felt {a} and a little tired, but mostly hopeful.",
    "I think I am learning to {vt} without rushing.",
))
_DIARY_CLOSE = _compile((
    "Goodnight for now,\n{me}", "Until tomorrow,\n{me}", "More tomorrow.", "Good night, Diary.",
))

_LETTER_BODY = _compile((
    "I am writing to express my interest in {e} and its importance to our community.",
    "As a long-standing member of {C}, I have seen how the {n} affects many families.",
    "I would like to request your support for a {a} initiative related to {e}.",
    "Over the past year, our organization has worked to {vt} the {n} in the region.",
    "These efforts have produced encouraging results, but much work remains.",
    "I believe that closer cooperation would benefit all parties involved.",
    "Please find enclosed a summary of our proposal and the relevant documents.",
    "I would welcome the opportunity to discuss this matter with you in person.",
    "Your experience with the {n} would be invaluable to this project.",
    "We are confident that the plan is both practical and {a}.",
    "The proposed schedule would begin in {m} and conclude by the end of {y}.",
    "I trust that you will give this request your careful consideration.",
    "Thank you for your time and attention to this matter.",
    "Should you require any further information, please do not hesitate to contact me.",
))

_SCENE_TITLES = _compile((
    "**Title: {ET}**", "**{ET}: A Short Scene**", "Title: The {A} {N}", "**Scene: {ET}**",
))
_SCENE_SETTING = _compile((
    "[Setting: {place}, {tm}. {P1} sits at a table covered with notes about {e}.]",
    "(A small room in {c}. Late evening. {P1} paces while {P2} reads.)",
    "[The stage is dim. A single lamp lights {P1}, who holds a {n}.]",
    "(Lights up on {place}. {P1} and {P2} stand facing each other.)",
))
_SCENE_LINE = _compile((
    "You keep talking about {e}, but you never say what it means to you.",
    "(sighing) Because I do not know yet. That is the whole point.",
    "Then let us figure it out together.",
    "Remember the {n} we found last {wd}? That was the beginning.",
    "(laughing) You still have it?",
    "Of course. Some things are worth keeping.",
    "I think {e} is more {a} than we admit.",
    "(quietly) Maybe. Or maybe we are afraid to {v}.",
    "Afraid? Of {e}?",
    "Of what it asks of us.",
    "(turning away) I did not come here to argue.",
    "Then why did you come?",
    "To {v}. To understand. To stop pretending the {n} does not matter.",
    "(after a pause) Fine. Start from the beginning.",
    "It began {tm}, at {place}.",
    "With {e}?",
    "With everything. {E} was only the first part.",
    "You always make things sound so {a}.",
    "And you always make them sound so simple.",
    "I brought the {n}. You said it was important.",
    "So, what is this really about?",
    "(smiling) It usually is.",
    "Do you ever wonder what {e} would look like without us?",
    "Every day. That is the problem.",
    "(pointing at the {n}) This. This is what I mean.",
    "We promised each other we would never {v} again.",
    "Promises change. People change. {E} changes.",
    "(softly) Not everything has to change.",
    "Then tell me what stays.",
    "You do. The {n} does. And {e}, I suppose.",
))
_SCENE_DIRECTION = _compile((
    "[{P1} crosses to the window and looks out.]",
    "({P2} picks up the {n} and studies it.)",
    "[A long silence. Somewhere, a clock ticks.]",
    "({P1} sits down slowly.)",
    "[The lights flicker for a moment.]",
    "({P2} hands {P1} a folded note.)",
))
_SCENE_END = ("[Lights fade.]", "(Blackout.)", "[Curtain.]", "(The lights slowly fade to black.)\n\nEND OF SCENE")

_POEM_TITLES = _compile((
    "**{ET}**", "**Ode to {ET}**", "**Song of {ET}**", "**{A} {ET}**", "Title: {ET}",
    "**In Praise of {ET}**",
))
_POEM_LINE = _compile((
    "{E} in the {a} light,", "where the {n} and the {n} meet,", "I {vt} the {a} {n} alone,",
    "and every {n} remembers you,", "the {a} hush of {e},", "we {v}, we {v}, we wait,",
    "beneath a sky of {a} {n},", "soft as the {n} at dawn,", "{d}, the {n} returns,",
    "and {e} hums {d} on,", "through {a} fields of {n},", "I hear the {n} call your name,",
    "O {e}, {a} and {a},", "let the {n} {v} again,", "still the {a} {n} stays,",
    "in quiet rooms of {n},", "your {a} voice, my {a} heart,", "the world turns {a} and slow,",
    "{e}, you are the {n},", "and we {v} beneath the stars,", "like rivers made of {n},",
    "each {n} a small and {a} thing,",
))
_SONG_LINE = _compile((
    "We were {a} like the {n} at night", "Oh, {e}, you {vt} me home", "Hold on to the {n}, don't let go",
    "Every road leads back to {e}", "I can feel the {a} {n} in my bones", "Singing through the {a} rain",
    "Dancing where the {n} used to be", "And we {v}, and we {v}", "Underneath the {a} sky",
    "Tell me that the {n} is true", "Running with the {a} wind", "{E}, {e}, stay with me",
    "We'll {v} until the morning light", "Nothing like the {n} we knew",
))
_RIDDLE_LINE = _compile((
    "I have {n} but never {n},", "I can {vt} without a voice,", "You will find me near the {n},",
    "I am {a} yet never {a},", "Some {vt} me, others {vt} me,", "I live where the {n} grows,",
    "The more you {v}, the more I stay,", "I have no hands, yet I {v},",
    "I travel far but never move,", "I am found in every {n},", "Without me, the {n} is {a},",
))
_RIDDLE_ASK = ("What am I?", "Can you guess what I am?", "Who am I?", "What could I be?")

_CLARIFY = {
    "email": (
        "Sure, I can help you draft an email about {e}.",
        "I'd be happy to help you write an email about {e}!",
        "Of course! I can put together an email about {e}.",
    ),
}
_CLARIFY_GENERIC = (
    "I'd be happy to write a {fmt} about {e}!",
    "Sure, I can help you with a {fmt} about {e}.",
)
_CLARIFY_FIRST = {
    "email": (
        "Could you please provide some details, such as who the recipient is and what the main purpose of the email is?",
        "Could you tell me who the email is for and what you would like it to achieve?",
    ),
}
_CLARIFY_FIRST_GENERIC = (
    "Could you tell me a bit more about the audience and the tone you have in mind?",
    "Is there a particular angle or key point you would like me to focus on?",
)
_CLARIFY_MORE = (
    "Should it be formal or casual?",
    "Are there any specific names, dates, or details you would like included?",
    "Let me know roughly how long you would like it to be.",
    "Is there anything you would definitely like me to mention?",
)
_CLARIFY_END = (
    "Once I have that information, I can tailor it to your needs.",
    "With those details, I can make sure it fits exactly what you need.",
)


# --------------------------------------------------------------------------- #
# Composition helpers
# --------------------------------------------------------------------------- #


_STEPS: dict[int, tuple[int, ...]] = {}


class _Ctx:
    __slots__ = ("r", "pools", "entity", "Entity")

    def __init__(self, rng: random.Random, entity: str) -> None:
        self.r = rng.random
        pools = _pools()[:]
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
        self.pools = pools
        self.entity = ent
        self.Entity = cap

    def render(self, tpl: _Tpl) -> str:
        fmt, kinds = tpl
        if not kinds:
            return fmt.replace("%%", "%")
        r = self.r
        pools = self.pools
        vals = []
        for k in kinds:
            p = pools[k]
            vals.append(p[int(r() * len(p))])
        return fmt % tuple(vals)

    def fill(self, tpls: tuple[_Tpl, ...]) -> str:
        return self.render(tpls[int(self.r() * len(tpls))])

    def order(self, n: int) -> tuple[int, int]:
        """(start, step) of a cheap pseudo-random permutation of range(n)."""
        steps = _STEPS.get(n)
        if steps is None:
            steps = _STEPS[n] = tuple(k for k in range(1, max(n, 2)) if math.gcd(k, n) == 1) or (1,)
        r = self.r
        return int(r() * n), steps[int(r() * len(steps))]

    def pick(self, seq: Sequence[str]) -> str:
        return seq[int(self.r() * len(seq))]

    def word(self, slot: str) -> str:
        p = self.pools[_SLOT_INDEX[slot]]
        return p[int(self.r() * len(p))]


def _fill_sentences(
    ctx: _Ctx,
    tpls: tuple[_Tpl, ...],
    budget: float,
    min_count: int = 1,
    sep: int = 1,
) -> list[str]:
    """Sentences from ``tpls`` (visited in a random cyclic order, so repeats only
    start after every template was used) until their joined length is closest to
    ``budget``."""
    out: list[str] = []
    n = 0
    size = len(tpls)
    pos, step = ctx.order(size)
    render = ctx.render
    while True:
        s = render(tpls[pos])
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
    chorus = "\n".join(ctx.fill(_SONG_LINE) for _ in range(4))
    bridge = "\n".join(ctx.fill(_SONG_LINE) for _ in range(2 + int(r() * 2)))
    outro = "\n".join(ctx.fill(_SONG_LINE) for _ in range(2))
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
    paras = _paragraphs(ctx, [opening] + body, 3, 5)
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
    paras = _paragraphs(ctx, [opening] + body, 2, 4)
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
    title = ctx.pick(("Mr.", "Ms.", "Dr."))
    recipient = f"{title} {w('f')} {rec_last}\n{w('j')}\n{w('C')}\n{w('addr')}\n{w('c')}, {w('st')} {w('zip')}"
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
    size = len(_SCENE_LINE)
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
            s = who + ": " + ctx.render(_SCENE_LINE[pos])
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
    text = text.strip()
    for bad in _FORBIDDEN:  # entities are user data: never let them smuggle markers in
        if bad in text:
            text = text.replace(bad, bad.replace(" ", "\u00a0").replace("=", "-"))
    return text
