"""How a recipe's model answers: the answer form that splits a reply into its prefix and its body.

The failure analysis (`_analysis`) compares the body with the conversation's writings and says
whether the prefix was there; which part of a reply is which is the recipe's (`EvalRecipe.answer_form`).
The default (`PrefixedAnswer`) is the MRCR form: the random string / hash glued to the front of
the writing. A recipe whose model answers otherwise (say a JSON object `{"prefix": ..., "text": ...}`)
supplies an object with a `split` method of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, NamedTuple, Protocol

if TYPE_CHECKING:
    from ._items import EvalItem

#: `ok`: the reply starts with the prefix; `late`: it holds it further on; `missing`: it does not.
Prefix = Literal["ok", "late", "missing"]


class SplitReply(NamedTuple):
    """A reply read by its answer form: where its prefix was, and the writing it returned."""

    prefix: Prefix
    body: str  # what the analysis compares with the writings ("" when nothing was returned)


class AnswerForm(Protocol):
    """The shape of a recipe's replies, as the failure analysis reads them."""

    def split(self, reply: str, item: EvalItem) -> SplitReply:
        """The reply's prefix state and its body, for the row `item`."""
        ...


def split_prefix(reply: str, prefix: str) -> SplitReply:
    """A reply of the form prefix + writing: `ok` with the text after the prefix, `late` with the
    text after its first occurrence further on, else `missing` with the whole reply."""
    if prefix and reply.startswith(prefix):
        return SplitReply("ok", reply[len(prefix) :])
    at = reply.find(prefix) if prefix else -1
    if at > 0:
        return SplitReply("late", reply[at + len(prefix) :])
    return SplitReply("missing", reply)


class PrefixedAnswer:
    """The MRCR answer form: the row's prefix (`EvalItem.prefix`) glued to the front of the writing."""

    def split(self, reply: str, item: EvalItem) -> SplitReply:
        return split_prefix(reply, item.prefix)


PREFIXED = PrefixedAnswer()
