"""mrcr-json's own data: its catalog and offline writer, its parquet layout, and the row a drawn spec makes."""

from __future__ import annotations

import json
import string
from collections import namedtuple
from typing import Any

import pyarrow as pa

from mrcr_gen._budget import AssemblyError, fill_budget
from mrcr_gen._models import Ask, ordinal
from mrcr_gen._seeding import derived_rng
from mrcr_gen._tokens import count_tokens_batch
from mrcr_gen.generate import RowSpec
from mrcr_gen.writers import MemoizedWriter
from mrcr_gen.writers._lexicon import lexicon

FORMATS = ("poem", "riddle", "story", "letter", "song", "limerick", "speech", "fable")
QUERY = (
    'Return the {k} (1 indexed) {what} as a JSON object {{"prefix": "{prefix}", "text": "<the {format}>"}}, '
    "the {format} as it was written. Do not include any other text in your response."
)
SCHEMA = pa.schema(
    [(c, pa.string()) for c in ("prompt", "answer", "random_string_to_prepend")] + [("n_needles", pa.int64())]
)
GAP = 100  # totals are drawn this far above a bin's lower edge: the fill ends short of its total by less
Pair = namedtuple("Pair", "ask text tokens")


class JsonWriter(MemoizedWriter):
    """Offline writings: a title and a few sentences of the shared lexicon, a pure function of (ask, variant)."""

    name = "offline"

    def asks(self) -> list[Ask]:
        return [Ask(format=f, entity=e) for f in FORMATS for e in lexicon()["ns"]]

    def compose(self, ask: Ask, variant: int) -> str:
        rng, w = derived_rng("mrcr-json", ask.text, variant), lexicon()
        lines = [f"{rng.choice(w['A'])} {ask.entity}, a {ask.format}"]
        for _ in range(rng.randint(2, 8)):
            words = (rng.choice(w[slot]) for slot in ("op", "dt", "n", "vt3", "ns", "d"))
            lines.append("{}, {} {} {} the {} {}.".format(*words))
        return "\n".join(lines)


def build_row(spec: RowSpec, writer: JsonWriter) -> tuple[dict, dict]:
    """The row `spec` draws (its columns) and its sidecar record; AssemblyError when it cannot fit its bin."""
    rng, asks, count = derived_rng("mrcr-json-row", spec.seed), writer.asks(), writer.tokenizer
    needle, k = rng.choice(asks), rng.randint(1, spec.n_needles)
    prefix = "".join(rng.choices(string.ascii_letters + string.digits, k=10))
    query = QUERY.format(k=ordinal(k), what=needle.text.removeprefix("write a "), prefix=prefix, format=needle.format)
    needles = [Pair(needle.text, w.text, 0) for w in writer.writings([(needle, v) for v in range(spec.n_needles)])]
    counts = count_tokens_batch([query, needle.text, *(p.text for p in needles)], tokenizer=count)
    fixed = counts[0] + spec.n_needles * counts[1] + sum(counts[2:]) + counts[1 + k]  # the answer counts too
    total = rng.randint(min(spec.bin.lower + GAP, spec.bin.upper), spec.bin.upper)

    def draw(left: int) -> list[Pair]:  # distractors: pairs of other asks
        keys = [(a, rng.randrange(8)) for a in rng.choices(asks, k=8) if a != needle]
        found, asked = writer.writings(keys), count_tokens_batch([a.text for a, _ in keys], tokenizer=count)
        return [Pair(a.text, w.text, n + w.n_tokens) for (a, _), w, n in zip(keys, found, asked, strict=True)]

    pairs = fill_budget(total - fixed, draw) if fixed <= total else []
    n_tokens = fixed + sum(p.tokens for p in pairs)
    if n_tokens not in spec.bin:
        raise AssemblyError(f"{spec.n_needles} needles cannot make a row of bin {spec.bin} ({n_tokens} tokens)")
    for i, place in enumerate(sorted(rng.randint(0, len(pairs)) for _ in needles)):  # the needles, in order
        pairs.insert(place + i, needles[i])
    messages = [
        m for p in pairs for m in ({"role": "user", "content": p.ask}, {"role": "assistant", "content": p.text})
    ]
    row: dict[str, Any] = {"prompt": json.dumps([*messages, {"role": "user", "content": query}], ensure_ascii=False)}
    row |= {"answer": needles[k - 1].text, "random_string_to_prepend": prefix, "n_needles": spec.n_needles}
    counted = {"prompt_tokens": n_tokens - counts[1 + k], "n_tokens": n_tokens}
    return row, {"bin": spec.bin.label, **counted, "n_needles": spec.n_needles, "seed": spec.seed}
