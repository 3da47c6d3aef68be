"""Pydantic models of the openai/mrcr row: the single source of truth for its shapes."""

from __future__ import annotations

import json
import re
from datetime import date

from pydantic import Field, field_validator, model_validator

from ..._models import Ask, Message, _Frozen

RANDOM_STRING_PATTERN = r"^[A-Za-z0-9]{10}$"


DATE_ADDED_PATTERN = r"^(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])-[0-9]{4}$"


PREAMBLE_HEADER = "Here are some examples of conversations succeeded by a follow-up question answered correctly:"


QUERY_TEMPLATE = (
    "Prepend {random_string} to the {ordinal} (1 indexed) {format} about {entity}. "
    "Do not include any other text in your response."
)


QUERY_PATTERN = re.compile(
    r"^Prepend (?P<random_string>\S+) to the (?P<ordinal>[1-9][0-9]*)(?:st|nd|rd|th) \(1 indexed\) "
    r"(?P<rest>.+)\. Do not include any other text in your response\.$",
    re.DOTALL,
)


def is_real_date(value: str) -> bool:
    """`value` is MM-DD-YYYY and names a day of the calendar (not 02-30-2025)."""
    if not re.match(DATE_ADDED_PATTERN, value):
        return False
    month, day, year = map(int, value.split("-"))
    try:
        date(year, month, day)
    except ValueError:
        return False
    return True


class Conversation(_Frozen):
    """The parsed `prompt`: preamble, user/assistant pairs, final query."""

    messages: tuple[Message, ...]

    def to_prompt(self) -> str:
        """The `prompt` column exactly as openai/mrcr stores it (`json.dumps` defaults)."""
        return json.dumps([m.model_dump() for m in self.messages])

    @classmethod
    def from_prompt(cls, prompt: str) -> Conversation:
        return cls(messages=tuple(Message(**m) for m in json.loads(prompt)))

    @property
    def n_chars(self) -> int:
        """`n_chars` as in real rows: characters of every message's content, answer excluded."""
        return sum(len(m.content) for m in self.messages)


class Needle(_Frozen):
    """One of the n identical asks hidden in the conversation."""

    ask: Ask
    response: str
    message_index: int = Field(ge=1, description="0-based index of the needle's user ask in the messages")
    ordinal: int = Field(ge=1, description="1-based position among the needles")


class Answer(_Frozen):
    """The expected answer: the random string glued (no space) to the target needle's writing."""

    random_string: str = Field(pattern=RANDOM_STRING_PATTERN)
    needle_text: str

    @property
    def text(self) -> str:
        return self.random_string + self.needle_text


class MrcrRow(_Frozen):
    """One parquet row with exactly the columns and types of openai/mrcr."""

    prompt: str
    answer: str
    random_string_to_prepend: str = Field(pattern=RANDOM_STRING_PATTERN)
    n_needles: int = Field(ge=1)
    desired_msg_index: int = Field(ge=1)
    total_messages: int = Field(ge=3)
    n_chars: int = Field(ge=0)
    date_added: str = Field(pattern=DATE_ADDED_PATTERN)

    @model_validator(mode="after")
    def _index_semantics(self) -> MrcrRow:
        if not self.answer.startswith(self.random_string_to_prepend):
            raise ValueError("answer must start with random_string_to_prepend")
        if self.desired_msg_index >= self.total_messages - 2:
            raise ValueError("desired_msg_index must point at a user ask followed by its writing")
        return self

    @property
    def conversation(self) -> Conversation:
        return Conversation.from_prompt(self.prompt)


class Sample(_Frozen):
    """A generated row plus the metadata the real schema lacks (kept in a sidecar file)."""

    row: MrcrRow
    needle_indices: tuple[int, ...] = Field(description="0-based message indices of the needle user asks, ascending")
    target_ordinal: int = Field(ge=1)
    prompt_tokens: int | None = Field(
        default=None,
        ge=0,
        description="tokens of the prompt contents alone (what is sent), by the same tokenizer as n_tokens",
    )
    n_tokens: int = Field(
        ge=0,
        description="tokens of prompt contents + answer, by the dataset's tokenizer "
        "(o200k_base unless its card names another)",
    )
    bin: str = Field(description="token bin label, e.g. '(32768, 65536]'")
    format: str
    entity: str
    seed: int

    @field_validator("needle_indices")
    @classmethod
    def _ascending(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if list(value) != sorted(set(value)):
            raise ValueError("needle_indices must be strictly ascending")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Sample:
        if len(self.needle_indices) != self.row.n_needles:
            raise ValueError("one needle index per needle")
        if self.target_ordinal > self.row.n_needles:
            raise ValueError("target_ordinal must be at most n_needles")
        if self.needle_indices[self.target_ordinal - 1] != self.row.desired_msg_index:
            raise ValueError("desired_msg_index must be the target ordinal's needle")
        return self

    def metadata(self) -> dict:
        """The sidecar record: everything but the row itself."""
        return self.model_dump(exclude={"row"})
