"""What defines an `mrcr-eval` run (`EvalConfig`), its settings fingerprint, and its errors."""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .._openai import DEFAULT_TIMEOUT
from .._prices import cached_price_for, price_per_1m

OPENAI_BASE_URL = "https://api.openai.com/v1"


class EvalError(RuntimeError):
    """Bad input for a run (missing file, changed settings, ...): exit code 2."""


class EvalFatal(EvalError):
    """The server refused in a way no retry can fix (bad key, unknown model, wrong URL)."""


class EvalConfig(BaseModel):
    """Everything that defines a run. Never holds the API key."""

    model_config = ConfigDict(extra="forbid")

    data: list[str] = Field(min_length=1)
    model: str
    out: str
    base_url: str | None = None
    concurrency: int = Field(default=8, ge=1)
    max_context_window: int | None = Field(default=None, ge=1)
    needles: list[int] | None = None
    bins: list[int] | None = Field(default=None, description="upper edges of the bins to keep")
    limit: int | None = Field(default=None, ge=0)
    temperature: float | None = None
    max_output_tokens: int | None = Field(default=None, ge=1)
    max_tokens_field: Literal["max_completion_tokens", "max_tokens"] = "max_completion_tokens"
    reasoning_effort: str | None = None
    extra_body: dict[str, Any] | None = Field(default=None, description="merged into every request body")
    strip_think: bool = Field(default=False, description="grade replies without <think> blocks (NOT official)")
    max_retries: int = Field(default=8, ge=0)
    timeout: float = Field(default=DEFAULT_TIMEOUT, gt=0)
    retry_errors: bool = True
    price_in: float | None = Field(default=None, ge=0, description="USD per 1M prompt tokens")
    price_out: float | None = Field(default=None, ge=0, description="USD per 1M completion tokens")
    price_cached: float | None = Field(default=None, ge=0, description="USD per 1M cached prompt tokens")
    # A control run (see _control): what is sent instead of the row's whole prompt; None = the row.
    control: Literal["query-only"] | None = None
    # K rows per (bin, needle count), the K whose seeded hash of the digest is smallest (see _subset).
    per_bin: int | None = Field(default=None, ge=1)
    per_bin_seed: int = 0
    tokenizer_spec: str = "o200k_base"
    # How --max-context-window counts a prompt (see _fit): contents with `tokenizer_spec`, the
    # chat template rendered with it, or the server's /tokenize.
    chat_template: bool = False
    count_with_server: bool = False
    # Where the replies come from (`_batch`): None, one request each; "api", the OpenAI Batch API;
    # "file", a batch output file made elsewhere (`vllm run-batch`). Part of the settings: a run
    # folder holds replies of one kind, priced as such.
    batch: Literal["api", "file"] | None = None

    @model_validator(mode="after")
    def _priced(self) -> EvalConfig:
        # one flag alone needs the model's list price
        cached_price_for(self.model, self.price_in, self.price_out, self.price_cached)
        return self

    @property
    def price_per_1m(self) -> dict[str, float] | None:
        """USD per 1M tokens (input, cached input, output): the flags, then the list prices of the
        model's exact name; None if unknown."""
        return price_per_1m(self.model, self.price_in, self.price_out, self.price_cached)

    @property
    def counts_as_seed(self) -> bool:
        """Whether prompts are counted as the seed counts them (o200k over the contents)."""
        return self.tokenizer_spec == "o200k_base" and not self.chat_template and not self.count_with_server

    def counting(self) -> dict[str, Any]:
        """How --max-context-window counts a prompt: a skip record made another way is recounted."""
        return {"tokenizer": self.tokenizer_spec, "chat_template": self.chat_template, "server": self.count_with_server}

    def request_params(self) -> dict[str, Any]:
        """Keyword arguments of every `chat.completions.create` call besides model and messages."""
        params: dict[str, Any] = {}
        if self.temperature is not None:
            params["temperature"] = self.temperature
        if self.max_output_tokens is not None:
            params[self.max_tokens_field] = self.max_output_tokens
        if self.reasoning_effort is not None:
            params["reasoning_effort"] = self.reasoning_effort
        if self.extra_body:
            params["extra_body"] = dict(self.extra_body)
        return params

    def settings(self) -> dict[str, Any]:
        """What decides the replies and their scores: a rerun must use the same. `control` and
        `batch` are absent unless set: runs made before them keep their fingerprint."""
        return (
            {
                "model": self.model,
                "base_url": (self.base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_BASE_URL).rstrip("/"),
                "request": self.request_params(),
                "strip_think": self.strip_think,
            }
            | ({"control": self.control} if self.control else {})
            | ({"batch": self.batch} if self.batch else {})
        )


def with_stored_prices(config: EvalConfig, previous: dict | None) -> EvalConfig:
    """The config with the prices an earlier command gave this run folder (run.json `options`)
    when this command gives none, so a resume without --price-in/--price-out/--price-cached still
    prices the run; prices given now win, as they would in a fresh run."""
    if any(getattr(config, name) is not None for name in PRICE_OPTIONS) or not previous:
        return config
    stored = previous.get("options")
    stored = stored if isinstance(stored, dict) else {}
    if all(stored.get(name) is None for name in PRICE_OPTIONS):
        return config
    try:
        return EvalConfig.model_validate(config.model_dump() | {name: stored.get(name) for name in PRICE_OPTIONS})
    except ValidationError:
        raise EvalError(
            f"{config.out}: run.json holds prices that are not valid; give --price-in, --price-out and --price-cached"
        ) from None


PRICE_OPTIONS = ("price_in", "price_out", "price_cached")


def settings_fingerprint(settings: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode("utf-8")).hexdigest()


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        flat: dict[str, Any] = {}
        for key, inner in value.items():
            flat.update(_flatten(inner, f"{prefix}{key}."))
        return flat
    return {prefix.rstrip("."): value}


def settings_differences(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """`name: old -> new` for every setting that differs (nested ones dotted, e.g. request.temperature)."""
    old, new = _flatten(before), _flatten(after)
    missing = object()
    lines = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key, missing), new.get(key, missing)
        if a == b:
            continue
        filled = new if b is missing else old  # the side where `key` is not a leaf
        if {} in (a, b) and missing in (a, b) and any(k.startswith(f"{key}.") for k in filled):
            continue  # an empty group (`request: {}`) on one side: the lines of its members say what differs
        show = lambda v: "(not set)" if v is missing else json.dumps(v)  # noqa: E731
        lines.append(f"{key}: {show(a)} -> {show(b)}")
    return lines
