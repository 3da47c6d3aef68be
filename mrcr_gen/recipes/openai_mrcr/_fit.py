"""Which (needle count, bin) pairs a writer's rows can fill, checked before any row is made.

A row's token total is drawn uniformly over its bin and its needle ask uniformly over the asks
(format x entity); a draw whose preamble, needles, query and answer take more than the total is
drawn again, whole (`Assembler.sample`). Rows are so uniform over the draws that fit: where the
needles of every ask fit under the bin's lower edge, no draw is ever drawn again, and totals and
needle asks are uniform. Where they do not, the rows lean to the top of the bin and to formats of
short writings (a note says so); where the needles of some format do not even fit under its upper
edge, that format could hardly ever be a needle and the pair is refused.
"""

from __future__ import annotations

from ..._budget import AssemblyError
from ...writers._base import Writer
from ._assembler import Assembler, tokens_window
from ._config import GenerateConfig


def check_needles_fit(config: GenerateConfig, writer: Writer) -> list[str]:
    """Notes on the (needle count, bin) pairs whose rows are not uniform; AssemblyError for a pair
    that cannot be filled: more needles than fit even at their shortest, or needles of some format
    that typically take more than the bin holds."""
    assembler = Assembler(writer, date_added=config.date_added, tokenizer=config.tokenizer)
    targets: list[tuple[str, int, int]] = (
        [(f"{config.tokens} tokens", *tokens_window(config.tokens))]
        if config.tokens is not None
        else [(str(b), b.smallest, b.upper) for b in dict.fromkeys(config.bins)]
    )
    notes = []
    for n in dict.fromkeys(config.needles):
        floor = assembler.needle_floor(n)
        where, _, highest = max(targets, key=lambda t: t[2])
        if floor > highest:
            raise AssemblyError(
                f"cannot fit {n} needles into {where}: each needle is an ask of at least "
                f"{floor // n - 1} tokens and a writing of at least 1, so {n} needles take at least {floor} tokens"
            )
        typical = assembler.typical_fixed(n)
        longest, (writing, tokens) = max(typical.items(), key=lambda item: item[1][1])
        for where, lowest, highest in targets:
            if tokens > highest:
                raise AssemblyError(
                    f"cannot fit {n} needles of every ask into {where}: with '{longest}' needles (median writing "
                    f"{writing} tokens) a row's preamble, needles, query and answer typically take {tokens} tokens; "
                    "choose fewer needles or a larger bin"
                )
            if config.tokens is None and tokens > lowest:
                notes.append(
                    f"{n} needles in {where}: with '{longest}' needles a row's preamble, needles, query and answer "
                    f"typically take {tokens} tokens, above the bin's lower edge; rows lean to the top of the bin "
                    "and to formats of short writings (README: Uniform rows)"
                )
    return notes


__all__ = ["check_needles_fit"]
