"""Shared async chat-completions helper (eval runner and LLM pool writer).

One place decides how we talk to an OpenAI-compatible server:

* `make_client` builds an `openai.AsyncOpenAI` whose own retries are off (`max_retries=0`);
  the key comes from the argument or `OPENAI_API_KEY`, the base URL from the argument or
  `OPENAI_BASE_URL`. A local server (base URL given, no key) gets the dummy key ``EMPTY``.
* `chat_completion` sends one request and retries it with exponential backoff and full
  jitter on transport failures only: 429, 5xx, timeouts, connection errors and bodies that are
  not a chat completion, honouring a ``Retry-After`` header. A chat completion with empty or
  `null` content is an answer (the official loop grades it), retried only with `retry_empty`
  (the pool writer wants text). After `max_retries` retries it raises `ChatError`.
* Answers that make every further request pointless (401, 403, 404, an unknown model) raise a
  `ChatError` with `fatal` set; a 400 saying the prompt is too long is a non-retried row error.
* `BoundedRunner` runs coroutines with at most `limit` in flight; when one fails, the others are
  cancelled and awaited, so that no task's exception goes unobserved.
* `utf8_problem` says why a reply cannot be stored as text (a lone surrogate is valid JSON,
  `"\\ud83d"`, but no UTF-8 file, Parquet column or SQLite text can hold it).
* Every response that came back is accounted for in `Billing` (on the result, or on the error):
  its HTTP status, and the usage it reported, retried ones included (a provider bills them).
* `endpoint` names the server a request goes to, normalised, so that writings can be keyed by it.
* The request body is built and encoded once per completion (`_openai_request`: `request_body`, `encode_json`), off the
  event loop when it is large, and posted as bytes through the client's own `post`: openai's
  `chat.completions.create` walks every message of the prompt on the event loop first (its
  `async_transform`, about a second per 1M-token prompt, which no other request moves during). The
  server gets the same JSON object, headers and key as from `create`; a client without `post(content=)`
  (an openai older than that) is called through `create`.

The API key never appears in an exception message or a log line: every message built here
passes through `redact`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import random
import re
import time
import types
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field

from . import _openai_request as _encoding
from ._usage import openai_fields

if TYPE_CHECKING:
    import openai

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 600.0
DUMMY_API_KEY = "EMPTY"
OPENAI_BASE_URL = "https://api.openai.com/v1"
#: `Billing.statuses` keys of attempts without a status: no HTTP response (timeout, connection
#: error), or a body that could not be read as JSON.
NO_RESPONSE = "no response"
UNREADABLE = "unreadable body"


def endpoint(base_url: str | None = None) -> str:
    """The server requests go to, as `make_client` picks it (the argument, else `OPENAI_BASE_URL`,
    else OpenAI), normalised: scheme and host lower-case, no trailing slash. Never holds a key."""
    url = (base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_BASE_URL).strip()
    parts = urlsplit(url)
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), parts.path.rstrip("/"), parts.query, ""))


class Billing(BaseModel):
    """What the requests of one chat completion brought back: a count per HTTP status (or
    NO_RESPONSE), and the usage every response reported, retried ones included."""

    statuses: dict[str, int] = Field(default_factory=dict)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0

    def count(self, status: int | str | None) -> None:
        key = NO_RESPONSE if status is None else str(status)
        self.statuses[key] = self.statuses.get(key, 0) + 1

    def bill(self, completion: Any) -> None:
        """Add the usage a response reported (nothing when it reported none)."""
        for name, value in _usage(completion).items():
            if value is not None:
                setattr(self, name, getattr(self, name) + value)

    def add(self, other: Billing) -> None:
        for status, n in other.statuses.items():
            self.statuses[status] = self.statuses.get(status, 0) + n
        for name in ("prompt_tokens", "completion_tokens", "reasoning_tokens", "cached_tokens"):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    @property
    def requests(self) -> int:
        return sum(self.statuses.values())


BACKOFF_BASE_S = 1.0
BACKOFF_CAP_S = 60.0
RETRY_AFTER_CAP_S = 300.0

T = TypeVar("T")


class ChatError(RuntimeError):
    """A chat completion failed for good (not retryable, or retries exhausted).

    `retryable` tells whether the last failure was of a transient kind; `status` is the HTTP
    status of the last failure when there was one; `attempts` counts the requests sent.
    """

    def __init__(
        self,
        message: str,
        *,
        attempts: int,
        status: int | None = None,
        retryable: bool = False,
        fatal: bool = False,
        billing: Billing | None = None,
    ):
        super().__init__(message)
        self.billing = billing if billing is not None else Billing()  # what the attempts brought back
        self.attempts = attempts
        self.status = status
        self.retryable = retryable
        self.fatal = fatal


class ChatStopped(ChatError):
    """The caller asked to stop (a fatal answer elsewhere) before another attempt was sent."""


class ChatResult(BaseModel):
    """The assistant text of one successful completion, with usage and timing."""

    model_config = ConfigDict(frozen=True)

    text: str
    content_null: bool = False
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    reasoning_tokens: int | None = None
    cached_tokens: int | None = None
    reasoning_chars: int = 0  # length of a separate `reasoning_content`; never graded
    latency_s: float
    attempts: int
    finish_reason: str | None = None
    model: str | None = None
    billing: Billing = Field(default_factory=Billing)  # every attempt's status and billed usage


class _Retryable(Exception):
    """Internal: a failure worth another attempt."""

    def __init__(
        self, message: str, *, status: int | None = None, retry_after: float | None = None, unreadable: bool = False
    ):
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after
        self.unreadable = unreadable  # a response came back, but its body is not JSON


_SECRETS: set[str] = set()


def redact(text: str) -> str:
    """`text` with every API key this process has used replaced by ***."""
    for secret in _SECRETS:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    return text


def make_client(
    base_url: str | None = None,
    api_key: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> openai.AsyncOpenAI:
    """An `AsyncOpenAI` with its own retries disabled (we retry in `chat_completion`)."""
    key = api_key or os.environ.get("OPENAI_API_KEY") or None
    url = base_url or os.environ.get("OPENAI_BASE_URL") or None
    if key is None:
        if url is None:
            raise ChatError(
                "no API key: set OPENAI_API_KEY, or pass --base-url for a local server that needs none",
                attempts=0,
            )
        key = DUMMY_API_KEY
    if key != DUMMY_API_KEY:
        _SECRETS.add(key)
    kwargs: dict[str, Any] = {"api_key": key, "max_retries": 0, "timeout": timeout}
    if url is not None:
        kwargs["base_url"] = url
    import openai  # the client costs about a second to import: only the commands that call a model pay it

    return openai.AsyncOpenAI(**kwargs)


def _retry_after_seconds(headers: Any) -> float | None:
    """`Retry-After` (seconds, or an HTTP date) or `retry-after-ms` from response headers."""
    if not hasattr(headers, "get"):
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return max(0.0, float(ms) / 1000.0)
    except (TypeError, ValueError):
        pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except (TypeError, ValueError):
        pass
    try:
        from email.utils import parsedate_to_datetime

        when = parsedate_to_datetime(value)
        return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError, IndexError):
        return None


def backoff_delay(attempt: int, *, base: float = BACKOFF_BASE_S, cap: float = BACKOFF_CAP_S) -> float:
    """Full jitter: uniform in [0, min(cap, base * 2**attempt)] for the attempt-th retry (0-based)."""
    return random.uniform(0.0, min(cap, base * (2**attempt)))


def _next_delay(last: _Retryable, attempts: int, base: float, cap: float) -> float:
    """Seconds before the next attempt: the server's Retry-After (capped), else full-jitter backoff."""
    delay = backoff_delay(attempts - 1, base=base, cap=cap)
    return delay if last.retry_after is None else min(last.retry_after, RETRY_AFTER_CAP_S)


FATAL_STATUSES = frozenset({401, 403, 404})
_UNKNOWN_MODEL = re.compile(
    r"model_not_found|unknown model|model\b.{0,200}\b(does not exist|not found|not exist)", re.I | re.S
)
_PROMPT_TOO_LONG = re.compile(
    r"context_length_exceeded|maximum context length|context length|context window|too many tokens|"
    r"prompt is too long|too long|exceeds the model",
    re.I,
)


def _server_message(exc: openai.APIStatusError) -> str:
    """The server's own words: `error.message` of the body when there is one."""
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return inner["message"]
        if isinstance(inner, str):
            return inner
    return exc.message


def is_fatal(status: int | None, message: str) -> bool:
    """Answers after which no request can succeed: bad key, forbidden, wrong URL, unknown model."""
    return status in FATAL_STATUSES or (status in (400, 422) and bool(_UNKNOWN_MODEL.search(message)))


def is_prompt_too_long(status: int | None, message: str) -> bool:
    return status == 400 and bool(_PROMPT_TOO_LONG.search(message))


def _classify(exc: BaseException) -> _Retryable | ChatError:
    """Map an exception of one attempt to retry-or-fail."""
    import openai  # loaded by `make_client` already: a look-up

    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        retry_after = _retry_after_seconds(getattr(exc.response, "headers", None))
        server_message = _server_message(exc)
        message = redact(f"HTTP {status}: {server_message}")
        if status in (408, 409, 429) or status >= 500:
            return _Retryable(message, status=status, retry_after=retry_after)
        return ChatError(message, attempts=0, status=status, retryable=False, fatal=is_fatal(status, server_message))
    if isinstance(exc, openai.APITimeoutError):
        return _Retryable("request timed out")
    if isinstance(exc, openai.APIConnectionError):
        return _Retryable(redact(f"connection error: {exc}"))
    if isinstance(exc, openai.APIResponseValidationError):
        return _Retryable(redact(f"malformed response: {exc.message}"), status=exc.status_code)
    if isinstance(exc, (ValueError, TypeError, AttributeError, KeyError, IndexError)):
        # json.JSONDecodeError is a ValueError: an unparseable body.
        return _Retryable(redact(f"malformed response: {type(exc).__name__}: {exc}"), unreadable=True)
    if isinstance(exc, openai.OpenAIError):
        return ChatError(redact(f"{type(exc).__name__}: {exc}"), attempts=0)
    raise exc


def _usage(completion: Any) -> dict[str, int | None]:
    """The token counts a response reported (None for those it did not), read by the usage ledger."""
    return openai_fields(getattr(completion, "usage", None))


def _parse(completion: Any, *, retry_empty: bool) -> dict[str, Any]:
    """The ChatResult fields of a completion; _Retryable when it is not a chat completion (or,
    with `retry_empty`, when its content is empty). `null` content reads as ""."""
    if isinstance(completion, (str, bytes)) or completion is None:
        raise _Retryable("malformed response: body is not a chat completion")
    choices = getattr(completion, "choices", None)
    if not choices:
        raise _Retryable("malformed response: no choices")
    choice = choices[0]
    message = getattr(choice, "message", None)
    if message is None:
        raise _Retryable("malformed response: choice without a message")
    text = getattr(message, "content", None)
    if text is not None and not isinstance(text, str):
        raise _Retryable(f"malformed response: content is {type(text).__name__}")
    if retry_empty and not text:
        raise _Retryable("empty response content")
    reasoning = getattr(message, "reasoning_content", None) or getattr(message, "reasoning", None)
    return {
        "text": text or "",
        "content_null": text is None,
        **_usage(completion),
        "reasoning_chars": len(reasoning) if isinstance(reasoning, str) else 0,
        "finish_reason": getattr(choice, "finish_reason", None),
        "model": getattr(completion, "model", None),
    }


async def chat_completion(
    client: openai.AsyncOpenAI,
    model: str,
    messages: Sequence[dict],
    *,
    max_retries: int = 8,
    backoff_base: float = BACKOFF_BASE_S,
    backoff_cap: float = BACKOFF_CAP_S,
    retry_empty: bool = False,
    stop: Callable[[], bool] | None = None,
    **params: Any,
) -> ChatResult:
    """One chat completion with our own retry policy.

    `params` go to `chat.completions.create` (`temperature`, `max_tokens`,
    `max_completion_tokens`, `reasoning_effort`, `extra_body`, ...); those set to None are
    dropped. `latency_s` is the duration of the successful attempt only. When `stop()` turns
    true, no further attempt is sent (`ChatStopped`).
    """
    kwargs = {k: v for k, v in params.items() if v is not None}
    send = _encoding.chat_request(client, model, messages, kwargs)
    body = await _encoding.encoded_request(model, messages, kwargs) if _encoding.posts_bytes(client) else None
    attempts = 0
    last: _Retryable | None = None
    billing = Billing()
    while True:
        if stop is not None and stop():
            raise ChatStopped(
                f"not sent: the run stopped{f' (after {last})' if last else ''}",
                attempts=attempts,
                retryable=True,
                billing=billing,
            )
        attempts += 1
        started = time.perf_counter()
        try:
            completion = await send(body)
            billing.count(200)  # a body came back: billed whatever it holds, even when it is retried
            billing.bill(completion)
            fields = _parse(completion, retry_empty=retry_empty)
            return ChatResult(**fields, latency_s=time.perf_counter() - started, attempts=attempts, billing=billing)
        except asyncio.CancelledError:
            raise
        except _Retryable as exc:
            last = exc
        except Exception as exc:  # classified below
            outcome = _classify(exc)
            unreadable = isinstance(outcome, _Retryable) and outcome.unreadable
            billing.count(UNREADABLE if unreadable and outcome.status is None else outcome.status)
            if isinstance(outcome, ChatError):
                raise ChatError(
                    str(outcome),
                    attempts=attempts,
                    status=outcome.status,
                    retryable=False,
                    fatal=outcome.fatal,
                    billing=billing,
                ) from None
            last = outcome
        if attempts > max_retries:
            raise ChatError(
                f"gave up after {attempts} attempts: {last}",
                attempts=attempts,
                status=last.status,
                retryable=True,
                billing=billing,
            ) from None
        delay = _next_delay(last, attempts, backoff_base, backoff_cap)
        log.info("chat attempt %d failed (%s); retrying in %.2fs", attempts, last, delay)
        await asyncio.sleep(delay)


class BoundedRunner:
    """Run coroutines with at most `limit` in flight; tracks the peak concurrency seen."""

    def __init__(self, limit: int):
        if limit < 1:
            raise ValueError("concurrency limit must be >= 1")
        self.limit = limit
        self._semaphore = asyncio.Semaphore(limit)
        self.in_flight = 0
        self.max_in_flight = 0

    async def run(self, factory: Callable[[], Awaitable[T]]) -> T:
        async with self._semaphore:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            try:
                return await factory()
            finally:
                self.in_flight -= 1

    async def map(self, func: Callable[[Any], Awaitable[T]], items: Iterable[Any]) -> list[T]:
        """`func(item)` for every item, bounded, results in input order. The first exception
        propagates after every other task has been cancelled and awaited: `gather` alone would
        leave them running, unobserved, past the caller's cleanup (a closed client, cache)."""
        tasks = [asyncio.ensure_future(self.run(functools.partial(func, item))) for item in items]
        try:
            return list(await asyncio.gather(*tasks))
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise


def utf8_problem(text: str) -> str | None:
    """Why `text` cannot be stored as UTF-8, or None when it can."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (
            f"the reply holds {text[exc.start]!r} at character {exc.start}, which UTF-8 cannot store (a lone surrogate)"
        )
    return None


def _namespace(value: Any) -> Any:
    """A JSON value with attribute access on its objects, as the client's response models give."""
    if isinstance(value, dict):
        return types.SimpleNamespace(**{str(k): _namespace(v) for k, v in value.items()})
    if isinstance(value, list):
        return [_namespace(v) for v in value]
    return value


def completion_from_body(body: Any, *, latency_s: float = 0.0) -> ChatResult:
    """The `ChatResult` of a chat completion given as its JSON body (a batch output line's
    `response.body`), read as `chat_completion` reads a response; ChatError (not retryable) when
    the body is not a chat completion."""
    if not isinstance(body, dict):
        raise ChatError("malformed response: body is not a chat completion", attempts=1)
    completion = _namespace(body)
    billing = Billing()
    billing.count(200)
    billing.bill(completion)
    try:
        fields = _parse(completion, retry_empty=False)
    except _Retryable as exc:
        raise ChatError(str(exc), attempts=1, status=200, billing=billing) from None
    return ChatResult(**fields, latency_s=latency_s, attempts=1, billing=billing)


async def api_call(
    call: Callable[[], Awaitable[T]],
    *,
    max_retries: int = 8,
    backoff_base: float = BACKOFF_BASE_S,
    backoff_cap: float = BACKOFF_CAP_S,
) -> T:
    """One call of the API besides chat completions (files, batches), retried on transport
    failures as `chat_completion` retries; ChatError (`fatal` for 401/403/404) when it fails for good."""
    attempts = 0
    while True:
        attempts += 1
        try:
            return await call()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            outcome = _classify(exc)
            if isinstance(outcome, ChatError):
                raise ChatError(str(outcome), attempts=attempts, status=outcome.status, fatal=outcome.fatal) from None
            if attempts > max_retries:
                raise ChatError(
                    f"gave up after {attempts} attempts: {outcome}",
                    attempts=attempts,
                    status=outcome.status,
                    retryable=True,
                ) from None
            delay = _next_delay(outcome, attempts, backoff_base, backoff_cap)
            log.info("API call attempt %d failed (%s); retrying in %.2fs", attempts, outcome, delay)
            await asyncio.sleep(delay)
