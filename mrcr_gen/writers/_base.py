"""What the assembler needs from a source of writings."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from .._models import Ask, Writing


@runtime_checkable
class Writer(Protocol):
    """A source of assistant writings for asks.

    A writer offers a finite set of asks, each with a number of distinct variants (different
    writings for the same ask). The assembler draws distractor asks uniformly from `asks()`
    and needles from asks with at least n variants.
    """

    name: str
    #: Spec of the tokenizer that counts the writings' `n_tokens` (see mrcr_gen._tokens).
    tokenizer: str

    def asks(self) -> Sequence[Ask]:
        """Every ask this writer can answer (the universe distractors are drawn from)."""
        ...

    def n_variants(self, ask: Ask) -> int:
        """How many pairwise distinct writings exist for `ask`."""
        ...

    def writings(self, keys: Sequence[tuple[Ask, int]]) -> list[Writing]:
        """The writings for (ask, variant) keys, in order, with their token counts by `tokenizer`."""
        ...

    def describe(self) -> dict:
        """What the dataset card records about this writer."""
        ...


@runtime_checkable
class SharingWriter(Writer, Protocol):
    """A writer whose distractor writings a large job can compose once, spread over the workers,
    into parts that every worker then reads (see `MemoizedWriter`)."""

    def shared_keys(self) -> list[tuple[Ask, int]]:
        """The keys every large job draws from."""
        ...

    def compose_part(self, start: int, stop: int, store: Path) -> None:
        """Compose and count `shared_keys()[start:stop]` into a part file under `store`."""
        ...

    def attach(self, store: Path) -> None:
        """Take the shared keys' writings from the parts under `store`."""
        ...
