"""Writings that are no writing: empty, a refusal, or talk about the ask instead of an answer.

The rules are data (`formats/quality_rules.json`: regular expressions anchored at the start of a
writing; the file says why each is shaped as it is). A flagged writing stays in its pool and is
listed by the quality report (`mrcr_gen.pool._quality`); `PoolWriter` never offers it for a needle slot.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Literal

from pydantic import Field

from .._models import _Frozen
from .._paths import _data_dir

RULES_FILE = "quality_rules.json"

FlagKind = Literal["empty", "refusal", "meta"]


class QualityRule(_Frozen):
    name: str
    kind: Literal["refusal", "meta"]
    pattern: str


class QualityRules(_Frozen):
    scan_chars: int = Field(gt=0)
    rules: tuple[QualityRule, ...]

    @property
    def compiled(self) -> list[tuple[QualityRule, re.Pattern[str]]]:
        return _compiled(self)


@lru_cache(maxsize=4)
def _compiled(rules: QualityRules) -> list[tuple[QualityRule, re.Pattern[str]]]:
    return [(rule, re.compile(rule.pattern, re.IGNORECASE)) for rule in rules.rules]


@lru_cache(maxsize=1)
def load_rules() -> QualityRules:
    """The rules of `formats/quality_rules.json`."""
    data = json.loads((_data_dir("formats") / RULES_FILE).read_text(encoding="utf-8"))
    return QualityRules(scan_chars=data["scan_chars"], rules=tuple(QualityRule(**r) for r in data["rules"]))


def flag(text: str, rules: QualityRules | None = None) -> tuple[FlagKind, str] | None:
    """(kind, rule name) when a writing is empty, a refusal or talk about the ask; None for a writing."""
    head = text.lstrip()
    if not head:
        return "empty", "empty"
    rules = rules or load_rules()
    head = head[: rules.scan_chars]
    for rule, pattern in rules.compiled:
        if pattern.search(head):
            return rule.kind, rule.name
    return None
