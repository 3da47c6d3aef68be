"""Pydantic models: the single source of truth for every data shape in mrcr-gen."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

ASK_TEMPLATE = "write a {format} about {entity}"
#: `ASK_TEMPLATE` read back (use `fullmatch`): format and entity neither empty nor padded with spaces.
ASK_PATTERN = re.compile(r"write a (?P<format>\S(?:.*?\S)?) about (?P<entity>\S(?:.*\S)?)")


def normalize_ask(text: str) -> str:
    """An ask with case, whitespace and punctuation removed: asks with equal keys are near-duplicates
    (the generator never lets one stand beside a needle; the validator warns about them)."""
    return re.sub(r"[\W_]+", "", text.lower())


def normalize_writing(text: str) -> str:
    """A writing with case and whitespace removed: needle writings with equal keys are
    near-duplicates (the generator never uses them as needles together; the validator warns)."""
    return "".join(text.casefold().split())


def ordinal(k: int) -> str:
    """1 -> '1st', 2 -> '2nd', 11 -> '11th', 22 -> '22nd'."""
    if 10 <= k % 100 <= 20:
        suffix = "th"
    else:
        suffix = {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th")
    return f"{k}{suffix}"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Message(_Frozen):
    """One chat message as stored in the `prompt` column (MRCR prompts have no system message)."""

    role: Literal["user", "assistant"]
    content: str


class Ask(_Frozen):
    """A user ask `write a {format} about {entity}`."""

    format: str = Field(min_length=1)
    entity: str = Field(min_length=1)

    @property
    def text(self) -> str:
        return ASK_TEMPLATE.format(format=self.format, entity=self.entity)

    def __str__(self) -> str:
        return self.text


class Writing(_Frozen):
    """An assistant writing answering an ask, with its token count (o200k unless a tokenizer is named)."""

    text: str
    n_tokens: int = Field(ge=0)


class FormatSpec(_Frozen):
    """A writing format of the catalog (see `formats/formats.json`)."""

    class TokenLengths(_Frozen):
        median: int = Field(gt=0)
        p10: int = Field(gt=0)
        p90: int = Field(gt=0)

    name: str
    ask: str
    guidance: str
    tokens: TokenLengths
