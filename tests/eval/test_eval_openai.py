"""The shared chat helper against the real test server: retries, faults, key hygiene."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import urllib.request

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrcr_gen._openai import (
    BoundedRunner,
    ChatError,
    ChatStopped,
    chat_completion,
    is_prompt_too_long,
    make_client,
)
from mrcr_gen._openai_request import encode_json, request_body
from tests.support.chat_server import CACHED_TOKENS, REASONING_TOKENS, ChatServer, Fault

from .conftest import API_KEY

MESSAGES = [
    {"role": "user", "content": "write a poem about cats"},
    {"role": "assistant", "content": "Cats purr."},
    {"role": "user", "content": "Prepend abcdefghij to the 1st (1 indexed) poem about cats. Do not include any other text in your response."},
]


def run(coro):
    return asyncio.run(coro)


async def _complete(server, **kwargs):
    client = make_client(server.base_url, api_key=API_KEY, timeout=kwargs.pop("timeout", 30))
    try:
        return await chat_completion(client, "test-model", MESSAGES, backoff_base=0.01, **kwargs)
    finally:
        await client.close()


def test_success_with_usage_and_params():
    with ChatServer("oracle") as server:
        result = run(_complete(server, temperature=0.0, max_tokens=None))
        assert result.text == "abcdefghijCats purr."
        assert result.attempts == 1
        assert result.prompt_tokens and result.completion_tokens == 2
        body = server.requests[0]
        assert body["messages"] == MESSAGES and body["model"] == "test-model"
        assert body["temperature"] == 0.0 and "max_tokens" not in body
        assert server.authorizations == [f"Bearer {API_KEY}"]


@pytest.mark.parametrize(
    "fault",
    [Fault.rate_limit(0), Fault.server_error(), Fault.malformed()],
    ids=["429", "500", "malformed"],
)
def test_each_transport_failure_is_retried(fault):
    with ChatServer("oracle", {1: fault, 2: fault}) as server:
        result = run(_complete(server))
        assert result.text == "abcdefghijCats purr."
        assert result.attempts == 3
        assert server.total_requests == 3


@pytest.mark.parametrize("kind", ["empty", "null"])
def test_empty_and_null_content_are_answers_not_retried(kind):
    with ChatServer("oracle", {1: Fault(kind)}) as server:
        result = run(_complete(server))
        assert result.text == "" and result.attempts == 1 and server.total_requests == 1
        assert result.content_null is (kind == "null")
        assert result.finish_reason == "stop"
    # The pool writer needs text: it asks for empty replies to be retried.
    with ChatServer("oracle", {1: Fault(kind)}) as server:
        result = run(_complete(server, retry_empty=True))
        assert result.text == "abcdefghijCats purr." and result.attempts == 2


@pytest.mark.parametrize(
    "kind, status",
    [("401", 401), ("403", 403), ("404", 404), ("unknown_model", 400)],
)
def test_refusals_are_fatal_and_not_retried(kind, status):
    with ChatServer("oracle", lambda n, body: Fault(kind)) as server:
        with pytest.raises(ChatError) as info:
            run(_complete(server))
        assert info.value.fatal and info.value.status == status and info.value.attempts == 1
        assert server.total_requests == 1
        assert f"HTTP {status}: " in str(info.value) and API_KEY not in str(info.value)


def test_prompt_too_long_is_a_plain_error_not_retried():
    with ChatServer("oracle", lambda n, body: Fault("too_long")) as server:
        with pytest.raises(ChatError) as info:
            run(_complete(server))
        assert not info.value.fatal and not info.value.retryable and info.value.attempts == 1
        assert is_prompt_too_long(info.value.status, str(info.value))
        assert server.total_requests == 1


def test_reasoning_fields_usage_details_and_finish_reason():
    with ChatServer("oracle", {1: Fault("reasoning"), 2: Fault("length")}) as server:
        result = run(_complete(server, reasoning_effort="high", extra_body={"chat_template_kwargs": {"enable_thinking": False}}))
        assert result.text == "abcdefghijCats purr."  # reasoning_content is not part of the reply
        assert result.reasoning_chars > 0 and result.reasoning_tokens == REASONING_TOKENS and result.cached_tokens == CACHED_TOKENS
        assert server.requests[0]["reasoning_effort"] == "high"
        assert server.requests[0]["chat_template_kwargs"] == {"enable_thinking": False}
        cut = run(_complete(server))
        assert cut.finish_reason == "length" and cut.text == "abcdefghijCats purr."[:10]
        assert cut.reasoning_tokens is None and cut.cached_tokens is None


def test_stop_prevents_further_attempts():
    with ChatServer("oracle", lambda n, body: Fault.server_error()) as server:
        calls = []

        def stop():
            calls.append(1)
            return len(calls) > 1  # allow the first attempt only

        with pytest.raises(ChatStopped) as info:
            run(_complete(server, stop=stop, max_retries=5))
        assert info.value.attempts == 1 and server.total_requests == 1


def test_retry_after_is_honoured():
    with ChatServer("oracle", {1: Fault.rate_limit(1)}) as server:
        started = time.monotonic()
        result = run(_complete(server, backoff_cap=0.01))
        assert time.monotonic() - started >= 0.95
        assert result.attempts == 2


def test_slow_response_times_out_and_is_retried():
    with ChatServer("oracle", {1: Fault.slow(3)}) as server:
        result = run(_complete(server, timeout=0.5))
        assert result.attempts == 2


def test_gives_up_with_clear_error_without_the_key():
    with ChatServer("oracle", lambda n, body: Fault.server_error()) as server:
        with pytest.raises(ChatError) as info:
            run(_complete(server, max_retries=2))
        assert info.value.attempts == 3 and info.value.status == 500 and info.value.retryable
        assert "3 attempts" in str(info.value) and API_KEY not in str(info.value)
        assert server.total_requests == 3


def test_client_errors_are_not_retried():
    with ChatServer("oracle") as server:
        client = make_client(server.base_url.replace("/v1", "/nope"), api_key=API_KEY)  # 404
        with pytest.raises(ChatError) as info:
            run(chat_completion(client, "m", MESSAGES))
        assert info.value.attempts == 1 and info.value.status == 404 and not info.value.retryable
        assert info.value.fatal  # a wrong URL fails every request alike
        assert API_KEY not in str(info.value)
        assert server.total_requests == 0


def test_make_client_keys(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ChatError, match="OPENAI_API_KEY"):
        make_client(None)
    local = make_client("http://127.0.0.1:1/v1")
    assert local.api_key == "EMPTY" and local.max_retries == 0
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:2/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    client = make_client(None)
    assert client.api_key == "sk-env" and "127.0.0.1:2" in str(client.base_url)


def test_bounded_runner_limits_concurrency():
    async def main():
        runner = BoundedRunner(3)

        async def work(i):
            await asyncio.sleep(0.01)
            return i * 2

        results = await runner.map(work, range(20))
        return runner, results

    runner, results = run(main())
    assert results == [i * 2 for i in range(20)]
    assert runner.max_in_flight == 3


def test_server_subprocess_mode_counts_and_serves_models():
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.chat_server", "--port", "0", "--policy", "echo", "--faults", "1:429"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = process.stdout.readline()
        assert line.startswith("PORT ")
        port = int(line.split()[1])
        models = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models"))
        assert models["data"][0]["id"] == "test-model"

        async def main():
            client = make_client(f"http://127.0.0.1:{port}/v1", api_key=API_KEY)
            try:
                return await chat_completion(client, "m", MESSAGES, backoff_base=0.01)
            finally:
                await client.close()

        assert run(main()).text == MESSAGES[-1]["content"]
        stats = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/stats"))
        assert stats["total_requests"] == 2 and stats["faults_served"] == {"429": 1}
        assert stats["per_last_user"] == {MESSAGES[-1]["content"]: 2}
        recorded = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/requests"))
        assert API_KEY not in json.dumps(recorded)
    finally:
        process.kill()
        process.wait()


def test_bounded_runner_cancels_and_awaits_the_others_when_one_fails():
    """The first exception propagates only after every other task is cancelled and awaited: none
    runs on past the caller's cleanup, and no exception is left unobserved."""
    unobserved = []

    async def main():
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: unobserved.append(context))
        runner = BoundedRunner(4)
        finished = []

        async def work(i):
            if i == 1:
                raise ValueError("boom")
            if i == 2:
                await asyncio.sleep(0.01)
                raise KeyError("second failure")
            await asyncio.sleep(0.5)
            finished.append(i)

        with pytest.raises(ValueError, match="boom"):
            await runner.map(work, range(8))
        pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        await asyncio.sleep(0.6)  # a task left running would finish in this time
        return finished, pending

    finished, pending = run(main())
    assert finished == [] and pending == []
    assert unobserved == []


# ----------------------------------------------------------------------- the encoded request (issue 23)

_json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
_json_values = st.recursive(
    _json_scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4), max_leaves=12
)


@given(
    messages=st.lists(st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant"]), "content": st.text()}), max_size=6),
    extra=st.dictionaries(st.text(min_size=1), _json_values, max_size=3),
)
def test_the_encoded_body_is_byte_for_byte_what_openai_encodes(messages, extra):
    from openai._utils._json import openapi_dumps

    body = request_body("test-model", messages, {"temperature": 0.5, "extra_body": extra})
    assert encode_json(body) == openapi_dumps(body)


def test_the_server_gets_what_chat_completions_create_sends(monkeypatch):
    """The same JSON object, key and request fields as from `create`, whose transform the encoded
    body skips (the fallback for an openai whose `post` takes no encoded body)."""
    import mrcr_gen._openai_request as chat

    params = {"temperature": 0.0, "max_completion_tokens": 7, "extra_body": {"top_k": 3, "temperature": 0.5}}
    seen = []
    for posts_bytes in (True, False):
        monkeypatch.setattr(chat, "posts_bytes", lambda client, posts_bytes=posts_bytes: posts_bytes)
        with ChatServer("oracle") as server:
            result = run(_complete(server, **params))
            seen.append((server.requests, server.authorizations, result.text))
    assert seen[0] == seen[1]
    assert seen[0][0][0]["temperature"] == 0.5 and seen[0][0][0]["top_k"] == 3  # extra_body wins, as in openai


def test_an_unknown_argument_is_refused_before_anything_is_sent():
    with ChatServer("oracle") as server, pytest.raises(TypeError, match="not_a_field"):
        run(_complete(server, not_a_field=1))
    assert server.total_requests == 0
