"""The usage ledger: the one place that turns a reply's usage into tokens and cost.

Every path that brings a reply back (an online chat completion, a Batch API output line, an
imported `vllm run-batch` or OpenAI output file, an Inspect log) reads its usage here, by its
source's convention, into one `Usage` whose fields follow OpenAI's chat-completions convention:
`prompt_tokens` is every input token, those served from the prompt cache included, and
`cached_tokens` (`usage.prompt_tokens_details.cached_tokens`) is the part of them that was cached.
Inspect's `ModelUsage` counts the other way (its `input_tokens` EXCLUDES `input_tokens_cache_read`
and `input_tokens_cache_write`): `from_inspect` and `to_inspect` convert both ways.

`cost` prices a `Usage` (cached tokens at the cached price) rounded to the micro-cent, so that
`cache_saved_usd` is the difference of the two rounded costs and shows no float noise; a batch
line is priced with `batch_price` (the list price at the Batch API's discount). `ledger_usage`
sums the usage of a run's records, costing a reply that several rows share (rows of identical
content sent as one batch request) once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any

#: What the Batch API takes off the list price.
BATCH_DISCOUNT = 0.5
#: Costs are rounded to this many decimals of a USD (1e-10: far below a token's price).
COST_DECIMALS = 10
FIELDS = ("prompt_tokens", "completion_tokens", "reasoning_tokens", "cached_tokens")


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


@dataclass(frozen=True)
class Usage:
    """Tokens of one or more replies, OpenAI's convention: `prompt_tokens` includes `cached_tokens`,
    `completion_tokens` includes `reasoning_tokens`."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    def as_record(self) -> dict[str, int]:
        """The `usage` of a results record (and of `summary.json`)."""
        return {name: getattr(self, name) for name in FIELDS}

    @property
    def uncached_prompt_tokens(self) -> int:
        return self.prompt_tokens - min(self.cached_tokens, self.prompt_tokens)


def from_record(usage: Mapping[str, Any] | None) -> Usage:
    """The usage of a results record (our fields; a missing or null count is 0)."""
    usage = usage or {}
    return Usage(*(_count(usage.get(name)) for name in FIELDS))


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def openai_fields(usage: Any) -> dict[str, int | None]:
    """The counts the `usage` of an OpenAI chat completion reports (an object of the SDK or the JSON
    body's dict, as a batch output line holds it), None for those it does not: `prompt_tokens`
    already includes `prompt_tokens_details.cached_tokens`."""

    def get(source: Any, name: str) -> Any:
        return source.get(name) if isinstance(source, Mapping) else getattr(source, name, None)

    return {
        "prompt_tokens": _int_or_none(get(usage, "prompt_tokens")),
        "completion_tokens": _int_or_none(get(usage, "completion_tokens")),
        "reasoning_tokens": _int_or_none(get(get(usage, "completion_tokens_details"), "reasoning_tokens")),
        "cached_tokens": _int_or_none(get(get(usage, "prompt_tokens_details"), "cached_tokens")),
    }


def from_openai(usage: Any) -> Usage:
    """The `Usage` of an OpenAI chat completion's usage (`openai_fields`; unreported counts are 0)."""
    return from_record(openai_fields(usage))


def from_inspect(usage: Any) -> Usage:
    """Inspect's `ModelUsage`: its `input_tokens` excludes the cache reads and writes, which are
    prompt tokens too (inspect_ai/model/_model_output.py: the true input is their sum)."""
    read = _count(getattr(usage, "input_tokens_cache_read", None))
    written = _count(getattr(usage, "input_tokens_cache_write", None))
    return Usage(
        prompt_tokens=_count(getattr(usage, "input_tokens", None)) + read + written,
        completion_tokens=_count(getattr(usage, "output_tokens", None)),
        reasoning_tokens=_count(getattr(usage, "reasoning_tokens", None)),
        cached_tokens=read,
    )


def to_inspect(usage: Usage, total_cost: float | None = None) -> dict[str, Any]:
    """The keyword arguments of Inspect's `ModelUsage` for `usage`: `input_tokens` without the
    cached tokens, which go to `input_tokens_cache_read` (as inspect_ai's OpenAI provider does)."""
    cached = min(usage.cached_tokens, usage.prompt_tokens)
    return {
        "input_tokens": usage.prompt_tokens - cached,
        "output_tokens": usage.completion_tokens,
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
        "input_tokens_cache_read": cached or None,
        "reasoning_tokens": usage.reasoning_tokens or None,
        "total_cost": total_cost,
    }


def batch_price(price: Mapping[str, Any]) -> dict[str, Any]:
    """`price_per_1m` of replies from the Batch API: every price at the batch discount, with
    `batch_discount` and the `list` price beside it."""
    discounted = {
        name: value * (1 - BATCH_DISCOUNT)
        for name, value in price.items()
        if isinstance(value, int | float) and not isinstance(value, bool)
    }
    return discounted | {"batch_discount": BATCH_DISCOUNT, "list": dict(price)}


def _usd(value: float) -> float:
    return round(value, COST_DECIMALS) + 0.0  # + 0.0: never -0.0


def cost(price: Mapping[str, Any], usage: Usage) -> dict[str, float]:
    """What `usage` costs at `price` (USD per 1M tokens: `input`, `output` and `cached_input`, which a
    price recorded before cached prices were known lacks: cached tokens are then priced as input):
    `cost_usd` = uncached prompt tokens x input + cached tokens x cached input + completion tokens
    (reasoning included) x output; `cost_without_cache_usd` prices every prompt token as input, and
    `cache_saved_usd` is the difference (each rounded to `COST_DECIMALS`)."""
    cached = min(usage.cached_tokens, usage.prompt_tokens)
    cached_price = price.get("cached_input", price["input"])
    output = usage.completion_tokens * price["output"]
    billed = _usd((usage.uncached_prompt_tokens * price["input"] + cached * cached_price + output) / 1_000_000)
    without_cache = _usd((usage.prompt_tokens * price["input"] + output) / 1_000_000)
    return {
        "cost_usd": billed,
        "cost_without_cache_usd": without_cache,
        "cache_saved_usd": _usd(without_cache - billed),
    }


def reply_key(record: Mapping[str, Any], *, shared: bool) -> Any:
    """Which paid reply a record's usage is: with `shared` (batch runs, where rows of identical
    content are one request), the reply to its content in its batch; else the record's own."""
    if shared and record.get("digest"):
        return (record["digest"], record.get("batch_id"))
    return id(record)


def ledger_usage(records: Iterable[Mapping[str, Any]], *, shared: bool = False) -> Usage:
    """The usage of the replies of `records`, each paid reply counted once (`reply_key`)."""
    seen: set[Any] = set()
    total = Usage()
    for record in records:
        key = reply_key(record, shared=shared)
        if key in seen:
            continue
        seen.add(key)
        total += from_record(record.get("usage"))
    return total


__all__ = [
    "BATCH_DISCOUNT",
    "Usage",
    "batch_price",
    "cost",
    "from_inspect",
    "from_openai",
    "from_record",
    "ledger_usage",
    "openai_fields",
    "to_inspect",
]
