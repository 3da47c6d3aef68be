"""Context-length bins of openai/mrcr: [4096, 8192], then (2^k, 2^(k+1)] up to 1048576."""

from __future__ import annotations

from ._models import _Frozen


class Bin(_Frozen):
    lower: int
    upper: int
    lower_inclusive: bool = False

    def __contains__(self, n_tokens: object) -> bool:
        if not isinstance(n_tokens, int):
            return False
        above = n_tokens >= self.lower if self.lower_inclusive else n_tokens > self.lower
        return above and n_tokens <= self.upper

    @property
    def smallest(self) -> int:
        """The smallest token count inside the bin."""
        return self.lower if self.lower_inclusive else self.lower + 1

    @property
    def label(self) -> str:
        return f"{'[' if self.lower_inclusive else '('}{self.lower}, {self.upper}]"

    def __str__(self) -> str:
        return self.label


BINS: tuple[Bin, ...] = (
    Bin(lower=4096, upper=8192, lower_inclusive=True),
    *(Bin(lower=2**k, upper=2 ** (k + 1)) for k in range(13, 20)),
)
BIN_UPPER_EDGES: tuple[int, ...] = tuple(b.upper for b in BINS)


def bin_by_upper(upper: int) -> Bin:
    """The bin whose upper edge is `upper` (what `--bin` takes)."""
    for candidate in BINS:
        if candidate.upper == upper:
            return candidate
    raise ValueError(f"no bin has upper edge {upper}; choose one of {', '.join(map(str, BIN_UPPER_EDGES))}")


def bin_for_tokens(n_tokens: int) -> Bin | None:
    """The bin holding `n_tokens`, or None when it lies outside [4096, 1048576]."""
    for candidate in BINS:
        if n_tokens in candidate:
            return candidate
    return None


BELOW_BINS = f"<{BINS[0].lower}"
ABOVE_BINS = f">{BINS[-1].upper}"


def bin_label(n_tokens: int) -> str:
    """The openai/mrcr bin label of a prompt+answer token count ('<4096'/'>1048576' outside)."""
    found = bin_for_tokens(n_tokens)
    if found is not None:
        return found.label
    return BELOW_BINS if n_tokens < BINS[0].lower else ABOVE_BINS


def bin_sort_key(label: str) -> tuple[int, str]:
    """Order bin labels by context length."""
    if label == BELOW_BINS:
        return (0, label)
    if label == ABOVE_BINS:
        return (2**62, label)
    try:
        return (int(label.rstrip("]").split(",")[1]), label)
    except (IndexError, ValueError):
        return (2**61, label)


def bin_upper(label: str) -> int | None:
    """Upper edge of a bin label, None for labels outside the bins."""
    key = bin_sort_key(label)[0]
    return key if 0 < key < 2**61 else None


def _short_tokens(n_tokens: int) -> str:
    if n_tokens >= 1048576 and n_tokens % 1048576 == 0:
        return f"{n_tokens // 1048576}M"
    return f"{n_tokens // 1024}k" if n_tokens % 1024 == 0 else str(n_tokens)


def _short_bin(label: str) -> str:
    upper = bin_upper(label)
    return label if upper is None else _short_tokens(upper)


def bin_headers(labels: list[str]) -> list[str]:
    """Short column / tick labels of bins: the upper edge ("8k", "1M"), or, where two bins share
    it (openai/mrcr's [4096, 8192] beside MRCR v2's (4096, 8192]), the whole range ("[4k, 8k]",
    "(4k, 8k]"), so two different bins never look like one."""
    shared = {upper for upper in map(bin_upper, labels) if sum(bin_upper(o) == upper for o in labels) > 1}
    headers = []
    for label in labels:
        upper = bin_upper(label)
        if upper is None or upper not in shared:
            headers.append(_short_bin(label))
            continue
        try:
            lower = int(label[1:].split(",")[0])
        except ValueError:
            headers.append(label)
            continue
        headers.append(f"{label[0]}{_short_tokens(lower)}, {_short_tokens(upper)}{label[-1]}")
    return headers


def label_sort_key(label: str) -> tuple[int, int]:
    """Bin labels ("(4096, 8192]", "[4096, 8192]") by their lower edge, other labels after them."""
    if label.startswith(("(", "[")):
        try:
            return (0, int(label[1:].split(",")[0]))
        except ValueError:
            pass
    return (1, 0)
