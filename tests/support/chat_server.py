"""A real OpenAI-compatible chat-completions server for tests (stdlib only).

In-process::

    with ChatServer(policy="oracle", faults={1: Fault.rate_limit()}) as server:
        client = make_client(server.base_url, api_key="sk-test")
        ...
        assert server.total_requests == 2

As a subprocess (so a test can SIGKILL a client while the server keeps counting)::

    python -m tests.support.chat_server --port 0 --policy oracle [--delay 0.05] [--faults 1:429,2:500]

prints ``PORT <n>`` on its first stdout line. ``GET /stats`` returns the counters as JSON,
``GET /requests`` every recorded request body, ``POST /reset`` clears them.

``POST /tokenize`` answers as vLLM's does (``{"count", "max_model_len", "tokens"}``) for a body with
``messages`` (chat) or ``prompt`` (text); `tokenize` (a callable ``body -> list[int]``) decides the
tokens, by default one per whitespace-separated word of every content plus one per message.
``tokenize_requests`` counts those calls.

Policies are callables ``policy(messages, request_json) -> str``; built-ins by name:
``oracle`` (solves MRCR from the conversation; MRCR v2 too, from its one flat message),
``first_needle`` (prefix + the first needle's writing), ``no_prefix`` (the right writing without the prefix), ``echo`` (the last user message);
`memorized` makes one that answers the queries it remembers without the conversation.
``cached_share`` reports that share of every prompt as cached (``usage.prompt_tokens_details.cached_tokens``).

Faults: a mapping of 1-based request number -> `Fault`, a list (index 0 = request 1, None =
no fault), or a callable ``(request_number, request_json) -> Fault | None``.

The Files and Batches API (``POST /v1/files`` multipart upload, ``GET /v1/files/{id}[/content]``,
``POST /v1/batches``, ``GET /v1/batches[/{id}]``) runs each batch's requests through the same
answers; `BatchBehaviour` decides how batches end (completed, expired part-way, failed, held in
progress) and injects faults into the requests and the API calls (``--batch-hold`` as a subprocess),
and how its output files come back: torn, with duplicated or conflicting lines. `ChatServer.vanish`
forgets batches or files (404 from then on), as an account's retention does.

Every request, billed reply and delivered reply is in `ChatServer.ledger` (tests/support/ledger.py),
keyed by the request's content and tagged with `ChatServer.tag`; `known_models` refuses other models
(HTTP 404, online and in batches), `snapshot` names the dated model in every reply as the OpenAI API
does (``gpt-4.1-mini`` -> ``gpt-4.1-mini-2025-04-14``), and a `stall` fault holds a request or API
call (after its work is done) until `ChatServer.unstall`, so a test can kill its client right there.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
import dataclasses
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.support.ledger import BILLED, DELIVERED, SENT, Event, Ledger, Usage, request_key

Policy = Callable[[list, dict], str]

# The final MRCR query, parsed independently of mrcr_gen so the tests check it from outside.
_QUERY = re.compile(
    r"^Prepend (?P<rs>\S+) to the (?P<k>[0-9]+)(?:st|nd|rd|th) \(1 indexed\) (?P<what>.+)\. "
    r"Do not include any other text in your response\.$",
    re.DOTALL,
)
# The final query of the plugin recipe `mrcr-json` (tests/recipe_plugin): the reply is a JSON object.
_JSON_QUERY = re.compile(
    r"^Return the (?P<k>[0-9]+)(?:st|nd|rd|th) \(1 indexed\) (?P<what>.+?) "
    r'as a JSON object \{"prefix": "(?P<rs>[^"]*)"',
    re.DOTALL,
)


# --------------------------------------------------------------------------- policies


def parse_query(messages: Sequence[dict]) -> tuple[str, int, str, list[int]]:
    """(random string, k, ask text, 0-based indices of the user messages equal to the ask)."""
    match = _QUERY.match(messages[-1]["content"])
    if match is None:
        raise ValueError("last message is not an MRCR query")
    ask = "write a " + match["what"]
    needles = [i for i, m in enumerate(messages[:-1]) if m["role"] == "user" and m["content"] == ask]
    return match["rs"], int(match["k"]), ask, needles


def _v2(messages: list):
    """The solved MRCR v2 row when the request is one user message ending in a v2 query."""
    from tests.support.v2_resolve import solve

    if len(messages) == 1 and messages[0]["content"].endswith("in your response.\n\nAssistant:"):
        return solve(messages[0]["content"])
    return None


def _json_answer(messages: list) -> str | None:
    """The right JSON object when the last message is a mrcr-json query (IndexError without its conversation)."""
    match = _JSON_QUERY.match(messages[-1]["content"])
    if match is None:
        return None
    ask = "write a " + match["what"]
    needles = [i for i, m in enumerate(messages[:-1]) if m["role"] == "user" and m["content"] == ask]
    return json.dumps({"prefix": match["rs"], "text": messages[needles[int(match["k"]) - 1] + 1]["content"]})


def oracle(messages: list, request_json: dict) -> str:
    solved = _v2(messages)
    if solved is not None:
        return solved.expected_answer
    answer = _json_answer(messages)
    if answer is not None:
        return answer
    rs, k, _, needles = parse_query(messages)
    return rs + messages[needles[k - 1] + 1]["content"]


def first_needle(messages: list, request_json: dict) -> str:
    solved = _v2(messages)
    if solved is not None:
        return solved.hash + solved.writings[0]
    rs, _, _, needles = parse_query(messages)
    return rs + messages[needles[0] + 1]["content"]


def no_prefix(messages: list, request_json: dict) -> str:
    _, k, _, needles = parse_query(messages)
    return messages[needles[k - 1] + 1]["content"]


def echo(messages: list, request_json: dict) -> str:
    return messages[-1]["content"]


NO_MEMORY = "I cannot see that conversation, so here is no writing of it."


def query_key(messages: Sequence[dict]) -> str:
    """The final query of a request, as a memory is keyed: the text from the last `Prepend ` on
    (openai/mrcr's last message; the tail of MRCR v2's one message)."""
    content = messages[-1]["content"]
    return content[content.rfind("Prepend ") :]


def memorized(answers: Mapping[str, str]) -> Policy:
    """A model that has seen some rows: a query it remembers (`answers`: `query_key` -> reply) is
    answered from memory, with or without the conversation. Any other is solved from the
    conversation when the conversation is there (oracle), and otherwise gets the prefix and an
    admission (`NO_MEMORY`): what a model that never saw the row can do without the haystack.
    ``memorized({})`` is a model that has seen nothing."""

    def policy(messages: list, request_json: dict) -> str:
        remembered = answers.get(query_key(messages))
        if remembered is not None:
            return remembered
        try:
            return oracle(messages, request_json)
        except (ValueError, IndexError):  # no conversation to solve it from
            match = re.search(r"Prepend (\S+) to the ", query_key(messages))
            return (match[1] if match else "") + NO_MEMORY

    return policy


POLICIES: dict[str, Policy] = {
    "oracle": oracle,
    "first_needle": first_needle,
    "no_prefix": no_prefix,
    "echo": echo,
}


# --------------------------------------------------------------------------- faults


@dataclass(frozen=True)
class Fault:
    """One injected answer. Transport failures: 429 | 500 | slow | malformed. Refusals: 401 | 403 |
    404 | unknown_model (HTTP 400 naming the model) | too_long (HTTP 400, prompt too long).
    HTTP-200 replies that are odd but valid: empty | null (content) | length (finish_reason
    "length", the reply cut in half) | reasoning (a `reasoning_content` and usage details with
    reasoning and cached tokens) | think (the reply wrapped after a <think> block). Held: stall (the
    request or API call waits, its work done, until `ChatServer.unstall`)."""

    kind: str
    retry_after: float | None = 0
    seconds: float = 0.0

    @classmethod
    def rate_limit(cls, retry_after: float | None = 0) -> Fault:
        return cls("429", retry_after=retry_after)

    @classmethod
    def server_error(cls) -> Fault:
        return cls("500")

    @classmethod
    def slow(cls, seconds: float) -> Fault:
        return cls("slow", seconds=seconds)

    @classmethod
    def malformed(cls) -> Fault:
        return cls("malformed")

    @classmethod
    def empty(cls) -> Fault:
        return cls("empty")

    @classmethod
    def parse(cls, text: str) -> Fault:
        """'429', '429@2' (Retry-After 2), 'slow@1.5', or any other kind by name."""
        kind, _, arg = text.partition("@")
        if kind == "429":
            return cls.rate_limit(float(arg) if arg else 0)
        if kind == "slow":
            return cls.slow(float(arg or 1))
        if kind in SIMPLE_KINDS:
            return cls(kind)
        raise ValueError(f"unknown fault {text!r}")


SIMPLE_KINDS = ("500", "malformed", "empty", "null", "401", "403", "404", "unknown_model", "too_long", "length",
                "reasoning", "think", "stall")
REFUSALS: dict[str, tuple[int, dict]] = {
    "401": (401, {"message": "Incorrect API key provided.", "type": "invalid_request_error", "code": "invalid_api_key"}),
    "403": (403, {"message": "You are not allowed to use this model.", "type": "permission_error"}),
    "404": (404, {"message": "The model `test-model` does not exist or you do not have access to it.",
                  "type": "invalid_request_error", "code": "model_not_found"}),
    "unknown_model": (400, {"message": "model 'test-model' not found, try pulling it first", "type": "invalid_request_error"}),
    "too_long": (400, {"message": "This model's maximum context length is 8192 tokens. However, your messages "
                                  "resulted in 9000 tokens. Please reduce the length of the messages.",
                       "type": "invalid_request_error", "code": "context_length_exceeded"}),
}
REASONING_TOKENS = 17
CACHED_TOKENS = 5


FaultSchedule = Mapping[int, Fault] | Sequence[Fault | None] | Callable[[int, dict], Fault | None] | None


def _fault_for(schedule: FaultSchedule, number: int, request_json: dict) -> Fault | None:
    if schedule is None:
        return None
    if callable(schedule):
        return schedule(number, request_json)
    if isinstance(schedule, Mapping):
        return schedule.get(number)
    if 0 < number <= len(schedule):
        return schedule[number - 1]
    return None


# --------------------------------------------------------------------------- server


def _count_words(text: str) -> int:
    return len(text.split())


def word_tokens(body: dict) -> list[int]:
    """The default /tokenize: a token per word of each content (or of `prompt`), plus one per message."""
    if "messages" in body:
        n = sum(_count_words(str(m.get("content", ""))) + 1 for m in body["messages"])
    else:
        n = _count_words(str(body.get("prompt", "")))
    return list(range(n))


class ChatServer:
    """OpenAI-compatible `/v1/chat/completions` on 127.0.0.1 in a background thread."""

    def __init__(
        self,
        policy: Policy | str = "oracle",
        faults: FaultSchedule = None,
        *,
        delay: float = 0.0,
        jitter: float = 0.0,
        port: int = 0,
        host: str = "127.0.0.1",
        tokenize: Callable[[dict], list[int]] = word_tokens,
        max_model_len: int = 1 << 20,
        cached_share: float = 0.0,
        batches: BatchBehaviour | None = None,
        known_models: Sequence[str] | None = None,
        snapshot: str | None = None,
        listed_models: Sequence[str] | None = None,
    ):
        self.policy: Policy = POLICIES[policy] if isinstance(policy, str) else policy
        self.batch_behaviour = batches or BatchBehaviour()
        self.tokenize = tokenize
        self.max_model_len = max_model_len
        self.cached_share = cached_share  # of each prompt's tokens, reported as served from a prompt cache
        self.faults = faults
        self.delay = delay
        # Each request waits `delay` +- up to `jitter` seconds, drawn from a seeded generator: answers
        # of a server whose latency varies, not all due at once (the default, jitter 0, is a wave).
        self.jitter = jitter
        self.known_models = None if known_models is None else frozenset(known_models)  # None: any model
        # What GET /v1/models lists: the known models, else `listed_models` (a vLLM-like server lists
        # the one it serves), else nothing (404: a server with no list, so no model is refused by it)
        listed = known_models if known_models is not None else listed_models
        self.listed_models = None if listed is None else sorted(listed)
        self.snapshot = snapshot  # the date of the model snapshot replies name, e.g. "2025-04-14"
        self._unstall = threading.Event()
        self._lock = threading.Lock()
        self.reset()
        handler = type("Handler", (_Handler,), {"chat": self})
        self._httpd = _QuietServer((host, port), handler)
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False
        self._thread: threading.Thread | None = None

    # counters ---------------------------------------------------------------
    def reset(self) -> None:
        with self._lock:
            self.total_requests = 0
            self.completed_requests = 0
            self.in_flight = 0
            self.max_in_flight = 0
            self.per_last_user: Counter[str] = Counter()
            self.requests: list[dict] = []
            self.authorizations: list[str | None] = []
            self.faults_served: Counter[str] = Counter()
            self.tokenize_requests = 0
            self.usage_sent: Counter[str] = Counter()  # usage of every chat completion sent (what is billed)
            self.files: dict[str, dict] = {}  # id -> {"object": FileObject fields, "content": bytes}
            self.batches: dict[str, dict] = {}  # id -> Batch fields, plus "_lines" (its answers) and "_checks"
            self.batch_requests: list[dict] = []  # the body of every request of every batch made
            self.api_calls: Counter[str] = Counter()  # upload, create, retrieve, list, content
            # For benchmarks: when the first chat request arrived and the last one was answered
            # (time.time()), and the sum of every chat request's seconds in the server: divided by
            # the span between them, the mean number of requests in flight.
            self.first_request_at: float | None = None
            self.last_answered_at: float | None = None
            self.busy_seconds = 0.0
            # For benchmarks: per chat request, (client port, CRC-32 of its body, when its body began
            # to be read, when it was parsed, when its answer was written), time.time(): a
            # connection's gap between an answer and its next request is the client's own time.
            self.timeline: list[tuple[int, int, float, float, float]] = []
            self._delays = random.Random(0)
            self.ledger = Ledger()  # every request sent, reply billed and reply delivered
            self.tag: str | None = None  # carried by the ledger events of the requests made from now on
            self.stalled = 0  # requests and API calls a `stall` fault holds right now

    def next_wait(self) -> float:
        """Seconds the next request waits: `delay`, +- up to `jitter` (never below 0)."""
        with self._lock:
            return max(self.delay + self.jitter * (2 * self._delays.random() - 1), 0.0)

    def stats(self) -> dict:
        with self._lock:
            return {
                "total_requests": self.total_requests,
                "completed_requests": self.completed_requests,
                "in_flight": self.in_flight,
                "max_in_flight": self.max_in_flight,
                "per_last_user": dict(self.per_last_user),
                "faults_served": dict(self.faults_served),
                "usage_sent": dict(self.usage_sent),
                "api_calls": dict(self.api_calls),
                "batches_created": len(self.batches),
                "batch_requests": len(self.batch_requests),
                "first_request_at": self.first_request_at,
                "last_answered_at": self.last_answered_at,
                "busy_seconds": self.busy_seconds,
            }

    def hold_stalled(self) -> None:
        """Called by a request or API call a `stall` fault holds: wait for `unstall` (at most a minute)."""
        with self._lock:
            self.stalled += 1
        try:
            self._unstall.wait(60)
        finally:
            with self._lock:
                self.stalled -= 1

    def unstall(self) -> None:
        """Let every held request and API call answer (to a client that may be gone), and wait until they did."""
        self._unstall.set()
        deadline = time.monotonic() + 30
        while (self.stalled or self.in_flight) and time.monotonic() < deadline:
            time.sleep(0.01)
        self._unstall.clear()

    def vanish(self, *, batches: bool = True, files: bool = True) -> None:
        """Forget every batch (`batches`) and every file (`files`) made so far: 404 for their ids
        from now on, as after the account's retention period or a deletion."""
        with self._lock:
            for kind, table in (("batches", self.batches), ("files", self.files)):
                if {"batches": batches, "files": files}[kind]:
                    for entry in table.values():
                        entry["_gone"] = True

    def release_batches(self) -> None:
        """Let batches held in progress (`BatchBehaviour.hold`) end at their next check."""
        with self._lock:
            self.batch_behaviour = dataclasses.replace(self.batch_behaviour, hold=False)

    # lifecycle --------------------------------------------------------------
    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> ChatServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="chat-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def serve_forever(self) -> None:
        self._httpd.serve_forever()

    def __enter__(self) -> ChatServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients hanging up (cancelled or timed-out requests) are part of the tests, not errors
        # to print into the output that tests inspect.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    chat: ChatServer
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY, as uvicorn and other real servers set it: the answer's headers and body are two
    # writes, and with Nagle's algorithm the body waited for the client's delayed ACK (about 40 ms
    # on Linux), a pause of this server's own in every client's measured turnaround.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def _send(self, status: int, body: bytes, headers: Mapping[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        try:
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _send_json(self, status: int, obj: Any, headers: Mapping[str, str] | None = None) -> None:
        self._send(status, json.dumps(obj).encode(), headers)

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        chat = self.chat
        if self.path.rstrip("/") == "/v1/models":
            if chat.listed_models is None:
                self._send_json(404, {"error": {"message": "no model list", "type": "not_found"}})
            else:
                models = [{"id": name, "object": "model", "owned_by": "test"} for name in chat.listed_models]
                self._send_json(200, {"object": "list", "data": models})
        elif self.path == "/stats":
            self._send_json(200, chat.stats())
        elif self.path == "/timeline":
            with chat._lock:
                self._send_json(200, list(chat.timeline))
        elif self.path == "/requests":
            with chat._lock:
                self._send_json(200, list(chat.requests))
        elif self.path.startswith(("/v1/files", "/v1/batches")):
            status, payload = batch_api(chat, "GET", self.path, b"", self.headers.get("Content-Type", ""))
            if isinstance(payload, bytes):
                self._send(status, payload)
            else:
                self._send_json(status, payload)
        else:
            self._send_json(404, {"error": {"message": "not found"}})

    def do_DELETE(self) -> None:  # noqa: N802 - stdlib name
        chat = self.chat
        route = self.path.split("?")[0].rstrip("/")
        if route.startswith("/v1/files/"):
            self._send_json(*delete_file(chat, route.rsplit("/", 1)[-1]))
        else:
            self._send_json(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        chat = self.chat
        reading = time.time()
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if self.path == "/reset":
            chat.reset()
            self._send_json(200, {"ok": True})
            return
        if self.path == "/batches/release":
            chat.release_batches()
            self._send_json(200, {"ok": True})
            return
        if self.path.startswith(("/v1/files", "/v1/batches")):
            status, payload = batch_api(chat, "POST", self.path, raw, self.headers.get("Content-Type", ""))
            self._send_json(status, payload)
            return
        if self.path.rstrip("/") == "/tokenize":
            try:
                tokens = chat.tokenize(json.loads(raw))
            except (ValueError, TypeError, KeyError) as exc:
                self._send_json(400, {"error": {"message": f"bad /tokenize request: {exc}"}})
                return
            with chat._lock:
                chat.tokenize_requests += 1
            self._send_json(200, {"count": len(tokens), "max_model_len": chat.max_model_len, "tokens": tokens})
            return
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._send_json(404, {"error": {"message": "not found"}})
            return
        try:
            body = json.loads(raw)
        except ValueError:
            self._send_json(400, {"error": {"message": "invalid JSON body"}})
            return
        messages = body.get("messages") or []
        last_user = next((m.get("content", "") for m in reversed(messages) if m.get("role") == "user"), "")
        arrived = time.time()
        with chat._lock:
            if chat.first_request_at is None:
                chat.first_request_at = arrived
            chat.total_requests += 1
            number = chat.total_requests
            chat.in_flight += 1
            chat.max_in_flight = max(chat.max_in_flight, chat.in_flight)
            chat.per_last_user[last_user] += 1
            chat.requests.append(body)
            chat.authorizations.append(self.headers.get("Authorization"))
            tag = chat.tag
            chat.ledger.add(Event(SENT, request_key(messages), tag, "online"))
        try:
            self._answer(chat, number, body, messages, tag)
        finally:
            answered = time.time()
            with chat._lock:
                chat.in_flight -= 1
                chat.completed_requests += 1
                chat.busy_seconds += answered - arrived
                chat.last_answered_at = answered
                chat.timeline.append((self.client_address[1], zlib.crc32(raw), reading, arrived, answered))

    def _answer(self, chat: ChatServer, number: int, body: dict, messages: list, tag: str | None) -> None:
        fault = _fault_for(chat.faults, number, body)
        if chat.delay or chat.jitter:
            time.sleep(chat.next_wait())
        status, payload, headers = chat_reply(chat, number, body, messages, fault)
        if isinstance(payload, bytes):
            self._send(status, payload, headers)
            return
        if status == 200:
            key, usage = request_key(messages), Usage.of(payload["usage"])
            chat.ledger.add(Event(BILLED, key, tag, "online", payload["id"], usage))
        self._send_json(status, payload, headers)
        if status == 200:
            chat.ledger.add(Event(DELIVERED, key, tag, "online", payload["id"], usage, ok=True))


def chat_reply(
    chat: ChatServer, number: int, body: dict, messages: list, fault: Fault | None
) -> tuple[int, dict | bytes, dict[str, str]]:
    """(HTTP status, JSON body or raw bytes, headers) of the answer to one chat completion request."""
    model = body.get("model", "test-model")
    if chat.known_models is not None and model not in chat.known_models:
        return 404, {"error": {"message": f"The model `{model}` does not exist or you do not have access to it.",
                               "type": "invalid_request_error", "code": "model_not_found"}}, {}
    if fault is not None:
        with chat._lock:
            chat.faults_served[fault.kind] += 1
        if fault.kind == "stall":
            chat.hold_stalled()
        if fault.kind == "429":
            headers = {} if fault.retry_after is None else {"Retry-After": f"{fault.retry_after:g}"}
            return 429, {"error": {"message": "rate limited", "type": "rate_limit_error"}}, headers
        if fault.kind == "500":
            return 500, {"error": {"message": "internal error", "type": "server_error"}}, {}
        if fault.kind == "malformed":
            return 200, b'{"id": "chatcmpl-broken", "choices": [', {}
        if fault.kind in REFUSALS:
            status, error = REFUSALS[fault.kind]
            return status, {"error": error}, {}
        if fault.kind == "slow":
            time.sleep(fault.seconds)
    if fault is not None and fault.kind in ("empty", "null"):
        content = "" if fault.kind == "empty" else None
    else:
        try:
            content = chat.policy(messages, body)
        except Exception as exc:  # a policy bug must show up in the test, not hang it
            return 500, {"error": {"message": f"policy failed: {type(exc).__name__}: {exc}"}}, {}
    kind = fault.kind if fault is not None else None
    message: dict[str, Any] = {"role": "assistant", "content": content}
    finish_reason = "stop"
    if kind == "length":
        content = message["content"] = content[: len(content) // 2]
        finish_reason = "length"
    elif kind == "think":
        content = message["content"] = "<think>\nThe user wants the right writing.\n</think>\n\n" + content
    elif kind == "reasoning":
        message["reasoning_content"] = "The user wants the right writing, so I look for it."
    prompt_tokens = sum(_count_words(str(m.get("content", ""))) for m in messages)
    completion_tokens = _count_words(content or "")
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    if chat.cached_share:
        usage["prompt_tokens_details"] = {"cached_tokens": int(prompt_tokens * chat.cached_share)}
    if kind == "reasoning":
        usage["completion_tokens"] += REASONING_TOKENS
        usage["total_tokens"] += REASONING_TOKENS
        usage["completion_tokens_details"] = {"reasoning_tokens": REASONING_TOKENS}
        usage["prompt_tokens_details"] = {"cached_tokens": CACHED_TOKENS}
    with chat._lock:
        chat.usage_sent["prompt_tokens"] += usage["prompt_tokens"]
        chat.usage_sent["completion_tokens"] += usage["completion_tokens"]
        chat.usage_sent["cached_tokens"] += usage.get("prompt_tokens_details", {}).get("cached_tokens", 0)
    return 200, {
        "id": f"chatcmpl-{number}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": f"{model}-{chat.snapshot}" if chat.snapshot else model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": usage,
    }, {}


# --------------------------------------------------------------------------- Files and Batches API


@dataclass(frozen=True)
class BatchBehaviour:
    """How the server's Batch API behaves. A batch answers its requests when it is made (each as
    `/v1/chat/completions` would, `faults` keyed by the request's 1-based number among all batch
    requests) and reports them at its `polls`-th status check: `completed`, or with `expire_after`
    set, `expired` with only that many requests done (the rest in the error file as
    `batch_expired`), or with `fail` set, `failed` with that error code and no files. `hold` keeps
    every batch `in_progress` until `ChatServer.release_batches` (or ``POST /batches/release``).
    `api_faults` answers the n-th call of an endpoint (upload, create, retrieve, list, content)
    with a `Fault` (429 or 500; `stall` holds the call after its work) instead.
    The output file of a batch that ends while `torn` is set has its last line cut in half (no
    newline); with `duplicate`, its first line twice; with `conflict`, a second HTTP-200 line for
    its first request with another reply (same usage) right after it (`conflict_first`: right
    before it). Each is billed once."""

    polls: int = 1
    hold: bool = False
    expire_after: int | None = None
    fail: str | None = None
    faults: FaultSchedule = None
    api_faults: Mapping[str, Mapping[int, Fault]] | None = None
    torn: bool = False
    duplicate: bool = False
    conflict: bool = False
    conflict_first: bool = False


EXPIRED_ERROR = {"code": "batch_expired", "message": "This request could not be executed before the completion window expired."}


def _multipart(raw: bytes, content_type: str) -> dict[str, tuple[str | None, bytes]]:
    """The fields of a multipart/form-data body: name -> (filename, bytes)."""
    from email.parser import BytesParser
    from email.policy import HTTP

    message = BytesParser(policy=HTTP).parsebytes(f"Content-Type: {content_type}\r\n\r\n".encode() + raw)
    fields = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        fields[str(name)] = (part.get_filename(), part.get_payload(decode=True) or b"")
    return fields


def _not_found(what: str) -> tuple[int, dict]:
    return 404, {"error": {"message": f"No such {what}", "type": "invalid_request_error"}}


def _live(table: dict[str, dict], key: str | None) -> dict | None:
    """The entry unless it vanished (`ChatServer.vanish`)."""
    found = table.get(key) if key is not None else None
    return None if found is None or found.get("_gone") else found


def _file_object(chat: ChatServer, content: bytes, filename: str, purpose: str, lines: list | None = None) -> dict:
    file_id = f"file-{len(chat.files) + 1}"
    obj = {"id": file_id, "object": "file", "bytes": len(content), "created_at": int(time.time()),
           "filename": filename, "purpose": purpose, "status": "processed"}
    # `_lines`: the ledger events its download delivers (an output or error file)
    chat.files[file_id] = {"object": obj, "content": content, "_lines": lines or []}
    return obj


def _run_batch_requests(chat: ChatServer, batch: dict, content: bytes) -> None:
    """Answer every request of the batch now (revealed when it ends): (custom_id, line) pairs."""
    lines, keys = [], []
    for text in content.decode("utf-8").splitlines():
        if not text.strip():
            continue
        request = json.loads(text)
        body = request["body"]
        with chat._lock:
            chat.batch_requests.append(body)
            number = len(chat.batch_requests)
        keys.append(request_key(body.get("messages") or []))
        chat.ledger.add(Event(SENT, keys[-1], batch["_tag"], "batch"))
        fault = _fault_for(chat.batch_behaviour.faults, number, body)
        status, payload, _ = chat_reply(chat, number, body, body.get("messages") or [], fault)
        if isinstance(payload, bytes):  # a body that is not a chat completion
            payload = {"id": f"chatcmpl-{number}", "object": "chat.completion", "choices": []}
        elif status == 200:
            payload["id"] = f"chatcmpl-batch-{number}"  # unlike any online reply's
        response = {"status_code": status, "request_id": f"req_{number}", "body": payload}
        lines.append((request["custom_id"], {"id": f"batch_req_{number}", "custom_id": request["custom_id"],
                                             "response": response, "error": None}))
    batch["_lines"], batch["_keys"] = lines, keys
    batch["request_counts"] = {"total": len(lines), "completed": 0, "failed": 0}


def _delivery(batch: dict, index: int, line: dict, ok: bool) -> Event:
    """The ledger event of downloading one line (`index`: its request among the batch's lines)."""
    body = (line.get("response") or {}).get("body") or {}
    ok = ok and line.get("response") is not None and line["response"]["status_code"] == 200
    return Event(DELIVERED, batch["_keys"][index], batch["_tag"], "batch", body.get("id"),
                 Usage.of(body.get("usage") or {}), ok=ok)


def _shaped_output(behaviour: BatchBehaviour, batch: dict, done: list[int]) -> tuple[bytes, list[Event]]:
    """The output file of the requests `done` (indices) that got HTTP 200: its bytes, and the
    ledger events its download delivers, duplicated, conflicting or torn as `behaviour` says."""
    lines = [(i, batch["_lines"][i][1], True) for i in done]
    if lines and behaviour.duplicate:
        lines.insert(1, lines[0])
    if lines and behaviour.conflict:
        i, first, _ = lines[0]
        other = json.loads(json.dumps(first))
        message = other["response"]["body"]["choices"][0]["message"]
        message["content"] = "(another reply) " + (message["content"] or "")
        other["id"] += "-again"
        other["response"]["body"]["id"] += "-again"
        lines.insert(0 if behaviour.conflict_first else 1, (i, other, False))
        lines = [(j, line, ok and j != i) for j, line, ok in lines]  # neither reply of the pair can be trusted
    texts = [json.dumps(line) + "\n" for _, line, _ in lines]
    events = [_delivery(batch, i, line, ok) for i, line, ok in lines]
    if lines and behaviour.conflict:
        events = [dataclasses.replace(e, conflict=i == lines[0][0]) for (i, _, _), e in zip(lines, events, strict=True)]
    if texts and behaviour.torn:
        texts[-1] = texts[-1][: len(texts[-1]) // 2]
        events[-1] = dataclasses.replace(events[-1], ok=False)
    return "".join(texts).encode(), events


def _end_batch(chat: ChatServer, batch: dict) -> None:
    behaviour = chat.batch_behaviour
    now = int(time.time())
    if behaviour.fail is not None:
        batch.update(status="failed", failed_at=now, errors={"object": "list", "data": [
            {"code": behaviour.fail, "message": f"the batch failed ({behaviour.fail})", "line": None, "param": None}]})
        return
    lines = batch["_lines"]
    done = range(len(lines) if behaviour.expire_after is None else min(behaviour.expire_after, len(lines)))
    output = [i for i in done if lines[i][1]["response"]["status_code"] == 200]
    errors = [i for i in done if lines[i][1]["response"]["status_code"] != 200]
    for i in output:
        body = lines[i][1]["response"]["body"]
        chat.ledger.add(Event(BILLED, batch["_keys"][i], batch["_tag"], "batch", body["id"], Usage.of(body["usage"])))
    if output:
        content, events = _shaped_output(behaviour, batch, output)
        name = f"{batch['id']}_output_file_id.jsonl"
        batch["output_file_id"] = _file_object(chat, content, name, "batch_output", events)["id"]
    error_lines = [lines[i][1] for i in errors] + [
        {"id": f"batch_req_x{i}", "custom_id": custom_id, "response": None, "error": EXPIRED_ERROR}
        for i, (custom_id, _) in enumerate(lines[len(done):])]
    if error_lines:
        content = "".join(json.dumps(line) + "\n" for line in error_lines).encode()
        events = [_delivery(batch, i, lines[i][1], False) for i in errors]
        batch["error_file_id"] = _file_object(chat, content, f"{batch['id']}_error_file_id.jsonl", "batch_output",
                                              events)["id"]
    batch["request_counts"] = {"total": len(lines), "completed": len(output), "failed": len(error_lines)}
    if behaviour.expire_after is None:
        batch.update(status="completed", completed_at=now)
    else:
        batch.update(status="expired", expired_at=now)


def _public(batch: dict) -> dict:
    return {key: value for key, value in batch.items() if not key.startswith("_")}


def _endpoint(method: str, route: str) -> str:
    endpoint = {
        ("POST", "/v1/files"): "upload",
        ("POST", "/v1/batches"): "create",
        ("GET", "/v1/batches"): "list",
    }.get((method, route))
    if endpoint is None and method == "GET":
        endpoint = "content" if route.endswith("/content") else "retrieve" if route.startswith("/v1/batches/") else "file"
    return str(endpoint)


def batch_api(chat: ChatServer, method: str, path: str, raw: bytes, content_type: str) -> tuple[int, dict | bytes]:
    """The Files and Batches endpoints: (status, JSON body or raw file content)."""
    route = path.split("?")[0].rstrip("/")
    endpoint = _endpoint(method, route)
    with chat._lock:
        chat.api_calls[endpoint] += 1
        number = chat.api_calls[endpoint]
        fault = (chat.batch_behaviour.api_faults or {}).get(endpoint, {}).get(number)
        if fault is not None:
            chat.faults_served[fault.kind] += 1
    if fault is not None and fault.kind != "stall":
        return (429, {"error": {"message": "rate limited"}}) if fault.kind == "429" else (
            500, {"error": {"message": "internal error"}})
    answer = _batch_answer(chat, endpoint, route, raw, content_type)
    if fault is not None:
        chat.hold_stalled()
    return answer


def _batch_answer(chat: ChatServer, endpoint: str, route: str, raw: bytes, content_type: str) -> tuple[int, dict | bytes]:
    with chat._lock:
        if endpoint == "upload":
            fields = _multipart(raw, content_type)
            filename, content = fields["file"]
            return 200, _file_object(chat, content, filename or "upload.jsonl", fields["purpose"][1].decode())
        if endpoint == "file":
            found = _live(chat.files, route.rsplit("/", 1)[-1])
            return (200, found["object"]) if found else _not_found("file")
        if endpoint == "content":
            found = _live(chat.files, route.split("/")[-2])
            if not found:
                return _not_found("file")
            for event in found["_lines"]:
                chat.ledger.add(event)
            return 200, found["content"]
        if endpoint == "create":
            request = json.loads(raw)
            if _live(chat.files, request.get("input_file_id")) is None:
                return _not_found("file")
            batch_id = f"batch_{len(chat.batches) + 1}"
            batch = {"id": batch_id, "object": "batch", "endpoint": request["endpoint"], "errors": None,
                     "input_file_id": request["input_file_id"], "completion_window": request["completion_window"],
                     "status": "validating", "output_file_id": None, "error_file_id": None,
                     "created_at": int(time.time()), "metadata": request.get("metadata"), "_checks": 0,
                     "_tag": chat.tag}
            chat.batches[batch_id] = batch
        else:
            batch = None
    if endpoint == "create":
        assert batch is not None
        _run_batch_requests(chat, batch, chat.files[batch["input_file_id"]]["content"])
        return 200, _public(batch)
    with chat._lock:
        if endpoint == "list":
            live = [b for b in reversed(chat.batches.values()) if not b.get("_gone")]
            return 200, {"object": "list", "data": [_public(b) for b in live],
                         "first_id": None, "last_id": None, "has_more": False}
        batch = _live(chat.batches, route.rsplit("/", 1)[-1])
        if batch is None:
            return _not_found("batch")
        if batch["status"] in ("validating", "in_progress"):
            batch["_checks"] += 1
            batch["status"] = "in_progress"
            if not chat.batch_behaviour.hold and batch["_checks"] >= chat.batch_behaviour.polls:
                _end_batch(chat, batch)
        return 200, _public(batch)


def delete_file(chat: ChatServer, file_id: str) -> tuple[int, dict]:
    """``DELETE /v1/files/{id}``: the file is marked `_gone` (kept, so that tests can still read what was
    uploaded); `api_calls["delete"]` counts the calls. A second deletion is a 404."""
    with chat._lock:
        chat.api_calls["delete"] += 1
        found = chat.files.get(file_id)
        if found is None or found.get("_gone"):
            return _not_found("file")
        found["_gone"] = True
    return 200, {"id": file_id, "object": "file", "deleted": True}


def _parse_faults(text: str | None) -> dict[int, Fault] | None:
    """'1:429,3:500,5:slow@2' -> {1: Fault(429), 3: Fault(500), 5: Fault(slow, 2s)}."""
    if not text:
        return None
    schedule = {}
    for item in text.split(","):
        number, _, spec = item.partition(":")
        schedule[int(number)] = Fault.parse(spec)
    return schedule


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--policy", default="oracle", choices=sorted(POLICIES))
    parser.add_argument("--delay", type=float, default=0.0, help="seconds every request waits")
    parser.add_argument("--jitter", type=float, default=0.0, help="each request waits --delay +- up to this")
    parser.add_argument("--faults", default=None, help="e.g. 1:429,2:500,3:slow@2,4:malformed,5:401")
    parser.add_argument("--batch-hold", action="store_true", help="batches stay in progress until POST /batches/release")
    args = parser.parse_args(argv)
    server = ChatServer(
        args.policy, _parse_faults(args.faults), delay=args.delay, jitter=args.jitter, port=args.port,
        batches=BatchBehaviour(hold=args.batch_hold), listed_models=["test-model"],
    )
    print(f"PORT {server.port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
