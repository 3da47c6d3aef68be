"""List prices of well-known models, for cost estimates (pool builds and eval runs)."""

from __future__ import annotations

# USD per 1M tokens (input, output): list prices of well-known models; others need --price-in/out.
PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-2024-08-06": (2.50, 10.00),
    "gpt-4o-2024-11-20": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-5": (1.25, 10.00),
    "gpt-5-mini": (0.25, 2.00),
    "gpt-5-nano": (0.05, 0.40),
}

# USD per 1M cached input tokens (`usage.prompt_tokens_details.cached_tokens`: prompt tokens the
# provider served from its prompt cache), for the same models. Source: the "Cached input" price on
# each model's page, https://developers.openai.com/api/docs/models/<name> (and
# https://openai.com/api/pricing), checked December 2026. gpt-4o and its snapshots: 1.25; gpt-4.1
# family and gpt-4o-mini: a quarter / a half of input; gpt-5 family: a tenth of input.
CACHED_INPUT_PRICES: dict[str, float] = {
    "gpt-4o": 1.25,
    "gpt-4o-2024-08-06": 1.25,
    "gpt-4o-2024-11-20": 1.25,
    "gpt-4o-mini": 0.075,
    "gpt-4.1": 0.50,
    "gpt-4.1-mini": 0.10,
    "gpt-4.1-nano": 0.025,
    "gpt-5": 0.125,
    "gpt-5-mini": 0.025,
    "gpt-5-nano": 0.005,
}


class PriceError(ValueError):
    """Only one of --price-in / --price-out for a model whose list price is not known."""


def price_for(model: str, price_in: float | None = None, price_out: float | None = None) -> tuple[float, float] | None:
    """(input, output) USD per 1M tokens: the flags win, then the table, by the model's exact name
    (a dated snapshot is priced only if the table lists it: snapshots can cost other than their alias).
    PriceError when only one flag is given and the table does not list the model: the other side
    would be a guess (it used to be 0, pricing the output free)."""
    known = PRICES.get(model)
    if price_in is None and price_out is None:
        return known
    if known is None:
        if price_in is None or price_out is None:
            given, missing = ("--price-in", "--price-out") if price_out is None else ("--price-out", "--price-in")
            raise PriceError(f"{given} without {missing}: the list price of {model!r} is not known, give both")
        return (price_in, price_out)
    return (price_in if price_in is not None else known[0], price_out if price_out is not None else known[1])


def cached_price_for(
    model: str, price_in: float | None = None, price_out: float | None = None, price_cached: float | None = None
) -> float | None:
    """USD per 1M cached prompt tokens: --price-cached, then the table's cached price of the model's
    exact name, else the input price (`price_for`): a server that gives no cache discount bills
    cached tokens as any other. None when the input price is not known either. PriceError for
    --price-cached for a model whose list price is not known without both --price-in and
    --price-out (as for one of those alone), and whatever `price_for` refuses."""
    price = price_for(model, price_in, price_out)
    if price_cached is not None:
        if price is None:
            raise PriceError(
                f"--price-cached without --price-in and --price-out: the list price of {model!r} is not known, "
                "give all three"
            )
        return price_cached
    if price is None:
        return None
    return CACHED_INPUT_PRICES.get(model, price[0])


def price_per_1m(
    model: str, price_in: float | None = None, price_out: float | None = None, price_cached: float | None = None
) -> dict[str, float] | None:
    """USD per 1M tokens (`input`, `cached_input`, `output`) as the usage ledger (`_usage.cost`)
    prices them: the flags, then the list prices of the model's exact name; None if unknown (see
    `price_for`, `cached_price_for`)."""
    price = price_for(model, price_in, price_out)
    if price is None:
        return None
    cached = cached_price_for(model, price_in, price_out, price_cached)
    return {"input": price[0], "cached_input": price[0] if cached is None else cached, "output": price[1]}
