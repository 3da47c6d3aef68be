"""One chat completion request, encoded once: the JSON body openai's client would send, byte for
byte, made off the event loop when the prompt is long (`chat.completions.create` walks every
message of a 1M-token prompt on the loop, seconds per request), and the function that posts it."""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ._json_text import compact_object

#: `chat.completions.create` arguments that are request options, not fields of the JSON body.
REQUEST_OPTIONS = ("extra_headers", "extra_query", "extra_body", "timeout")
#: Bodies with fewer characters of message content are encoded on the event loop (well under a
#: millisecond); longer ones in a worker thread.
ENCODE_INLINE_CHARS = 1 << 16
_compact_json = functools.partial(json.dumps, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def request_body(model: str, messages: Sequence[dict], params: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON object `chat.completions.create(model=, messages=, **params)` sends: model,
    messages and every other field, then `extra_body` merged over them (as openai merges it)."""
    body: dict[str, Any] = {"model": model, "messages": list(messages)}
    body.update((name, value) for name, value in params.items() if name not in REQUEST_OPTIONS)
    body.update(params.get("extra_body") or {})
    return body


def encode_json(body: Mapping[str, Any]) -> bytes:
    """`body` as openai's client encodes a request (compact, UTF-8, no NaN), byte for byte, with a
    list field encoded one item at a time: a 1M-token prompt is thousands of calls of microseconds,
    each letting the event loop's thread take the GIL back, not one call of tens of milliseconds."""
    fields = []
    for name, value in body.items():
        if isinstance(value, list):
            encoded = b"[" + b",".join(_compact_item(item).encode() for item in value) + b"]"
        else:
            encoded = _compact_json(value).encode()
        fields.append(_compact_json(str(name)).encode() + b":" + encoded)
    return b"{" + b",".join(fields) + b"}"


def _compact_item(item: Any) -> str:
    """`_compact_json(item)`; a message (a dict of strings) by `compact_object`, in half the time."""
    return compact_object(item) if type(item) is dict else _compact_json(item)


def content_reaches(messages: Sequence[dict], chars: int) -> bool:
    """Whether the messages hold `chars` characters of content or more: counted until they do (on
    the event loop: a few messages of a long prompt, not its thousands)."""
    held = 0
    for message in messages:
        if isinstance(message, dict):
            held += len(message.get("content") or "")
            if held >= chars:
                return True
    return False


_POSTS_BYTES: dict[type, bool] = {}


def posts_bytes(client: Any) -> bool:
    """Whether this client's `post` takes an encoded body (`content=`), as openai's does since 1.9x."""
    kind = type(client)
    if kind not in _POSTS_BYTES:
        try:
            _POSTS_BYTES[kind] = "content" in inspect.signature(kind.post).parameters
        except (AttributeError, TypeError, ValueError):
            _POSTS_BYTES[kind] = False
    return _POSTS_BYTES[kind]


@functools.lru_cache(maxsize=1)
def _create_arguments() -> frozenset[str] | None:
    """The keyword arguments `chat.completions.create` takes (None when they cannot be told)."""
    try:
        from openai.resources.chat.completions import AsyncCompletions

        return frozenset(inspect.signature(AsyncCompletions.create).parameters) - {"self"}
    except (ImportError, AttributeError, TypeError, ValueError):
        return None


def _request_options(params: Mapping[str, Any]) -> dict[str, Any]:
    """The request options `create` would give the client for these arguments."""
    options: dict[str, Any] = {}
    if params.get("extra_headers") is not None:
        options["headers"] = params["extra_headers"]
    if params.get("extra_query") is not None:
        options["params"] = params["extra_query"]
    if "timeout" in params:
        options["timeout"] = params["timeout"]
    if _has_security_option():
        options["security"] = {"bearer_auth": True}  # as `create` asks: the API key, never an admin key
    return options


@functools.lru_cache(maxsize=1)
def _has_security_option() -> bool:
    try:
        from openai._types import RequestOptions
    except ImportError:
        return False
    return "security" in getattr(RequestOptions, "__annotations__", {})


def chat_request(client: Any, model: str, messages: Sequence[dict], kwargs: dict[str, Any]) -> Callable[..., Any]:
    """A function that sends one attempt: `client.post` with `body` (encoded once, see `encode_json`)
    when the client takes one, else `chat.completions.create`. Unknown arguments raise TypeError now,
    as `create` would, before anything is sent."""
    known = _create_arguments()
    unknown = sorted(set(kwargs) - known - {"model", "messages"}) if known is not None else []
    if unknown:
        raise TypeError(f"chat.completions.create() got unexpected keyword argument(s): {', '.join(unknown)}")
    if not posts_bytes(client):

        async def create(body: bytes | None = None) -> Any:
            # Messages are the data files' JSON dicts; the server, not openai's TypedDicts, checks their shape.
            return await client.chat.completions.create(model=model, messages=list(messages), **kwargs)

        return create
    from openai.types.chat import ChatCompletion

    options = _request_options(kwargs)

    async def post(body: bytes | None = None) -> Any:
        return await client.post("/chat/completions", cast_to=ChatCompletion, content=body, options=options)

    return post


async def encoded_request(model: str, messages: Sequence[dict], params: Mapping[str, Any]) -> bytes:
    """The encoded body of a request, made in a worker thread when the prompt is long."""
    body = request_body(model, messages, params)
    if not content_reaches(messages, ENCODE_INLINE_CHARS):
        return encode_json(body)
    return await asyncio.to_thread(encode_json, body)


__all__ = [
    "ENCODE_INLINE_CHARS",
    "REQUEST_OPTIONS",
    "chat_request",
    "encode_json",
    "encoded_request",
    "posts_bytes",
    "request_body",
]
