"""The MRCR v2 catalog: formats, needle / filler / few-shot topics and styles, read from
`formats/v2_formats.json`, `formats/v2_styles.json` and `entities/v2_topics.json`."""

from __future__ import annotations

import hashlib
import itertools
import json
from functools import lru_cache
from typing import NamedTuple

from pydantic import Field, model_validator

from ..._models import FormatSpec, _Frozen
from ..._paths import _data_dir
from ._text import ask_text


class V2Key(NamedTuple):
    """A (format, topic, style) triplet: one ask, several distinct writings."""

    format: str
    topic: str
    style: str

    @property
    def ask(self) -> str:
        return ask_text(self.format, self.topic, self.style)


class Register(_Frozen):
    """What makes a style recognisable in offline text."""

    templates: tuple[str, ...] = Field(min_length=1)
    openers: tuple[str, ...]
    greeting: str
    signoff: str
    exclaim: str
    hashtags: tuple[str, ...]


class V2Format(_Frozen):
    name: str
    guidance: str
    tokens: FormatSpec.TokenLengths


class V2Catalog(_Frozen):
    formats: tuple[V2Format, ...]
    needle_topics: tuple[str, ...]
    filler_topics: tuple[str, ...]
    fewshot_topics: tuple[str, ...]
    styles: dict[str, Register]
    fewshot_styles: dict[str, Register]
    words: dict[str, tuple[str, ...]]
    angles: tuple[str, ...]

    @model_validator(mode="after")
    def _disjoint(self) -> V2Catalog:
        groups = {"needle": self.needle_topics, "filler": self.filler_topics, "fewshot": self.fewshot_topics}
        for (a, left), (b, right) in itertools.combinations(groups.items(), 2):
            shared = set(left) & set(right)
            if shared:
                raise ValueError(f"{a} and {b} topics overlap: {sorted(shared)}")
        if set(self.styles) & set(self.fewshot_styles):
            raise ValueError("few-shot styles must differ from the transcript styles")
        return self

    def register(self, style: str) -> Register:
        return self.styles.get(style) or self.fewshot_styles[style]

    def format(self, name: str) -> V2Format:
        return next(f for f in self.formats if f.name == name)

    def _keys(self, topics: tuple[str, ...], styles: dict[str, Register]) -> tuple[V2Key, ...]:
        return tuple(V2Key(f.name, t, s) for f in self.formats for t in topics for s in styles)

    @property
    def needle_keys(self) -> tuple[V2Key, ...]:
        return self._keys(self.needle_topics, self.styles)

    @property
    def filler_keys(self) -> tuple[V2Key, ...]:
        return self._keys(self.filler_topics, self.styles)

    @property
    def fewshot_keys(self) -> tuple[V2Key, ...]:
        return self._keys(self.fewshot_topics, self.fewshot_styles)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()


@lru_cache(maxsize=1)
def load_v2_catalog() -> V2Catalog:
    def read(folder: str, name: str):
        return json.loads((_data_dir(folder) / name).read_text(encoding="utf-8"))

    topics = read("entities", "v2_topics.json")
    styles = read("formats", "v2_styles.json")
    return V2Catalog(
        formats=tuple(V2Format(**spec) for spec in read("formats", "v2_formats.json")),
        needle_topics=tuple(topics["needle"]),
        filler_topics=tuple(topics["filler"]),
        fewshot_topics=tuple(topics["fewshot"]),
        styles=styles["styles"],
        fewshot_styles=styles["fewshot_styles"],
        words=styles["words"],
        angles=tuple(styles["angles"]),
    )
