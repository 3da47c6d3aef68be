"""The test server's measurements that bench/bench_eval_start.py reads: every chat request's
connection and times, and a latency that varies (jitter) the same way in every run."""

from __future__ import annotations

import http.client
import json
import zlib

from tests.support.chat_server import ChatServer, _Handler


def post(connection: http.client.HTTPConnection, body: bytes) -> dict:
    connection.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    return json.loads(connection.getresponse().read())


def test_the_timeline_has_every_chat_request_with_its_connection_and_times():
    bodies = [json.dumps({"model": "m", "messages": [{"role": "user", "content": f"hello {i}"}]}).encode() for i in range(3)]
    with ChatServer("echo", delay=0.01) as server:
        connection = http.client.HTTPConnection("127.0.0.1", server.port)  # one connection, kept alive
        for body in bodies:
            assert post(connection, body)["choices"][0]["message"]["content"].startswith("hello")
        other = http.client.HTTPConnection("127.0.0.1", server.port)
        post(other, bodies[0])
        timeline = server.timeline
    assert [crc for _, crc, *_ in timeline] == [zlib.crc32(b) for b in bodies] + [zlib.crc32(bodies[0])]
    ports = [port for port, *_ in timeline]
    assert len(set(ports[:3])) == 1 and ports[3] != ports[0]
    for _, _, reading, arrived, answered in timeline:
        assert reading <= arrived < answered and answered - arrived >= 0.01
    assert all(timeline[i][4] <= timeline[i + 1][2] for i in range(2))  # one after the other on a connection


def test_jitter_varies_the_wait_within_its_bounds_the_same_way_in_every_server():
    def waits(**kwargs) -> list[float]:
        with ChatServer("echo", **kwargs) as server:
            return [server.next_wait() for _ in range(200)]

    jittered = waits(delay=1.0, jitter=0.5)
    assert jittered == waits(delay=1.0, jitter=0.5)
    assert all(0.5 <= w <= 1.5 for w in jittered) and max(jittered) - min(jittered) > 0.5
    assert set(waits(delay=1.0)) == {1.0}
    assert min(waits(delay=0.1, jitter=0.5)) == 0.0  # never below zero


def test_answers_are_not_held_back_by_nagles_algorithm():
    # The headers and the body are two writes: with Nagle's algorithm the body waited for the
    # client's delayed ACK, about 40 ms on Linux, a pause of the server's in every measured turnaround.
    assert _Handler.disable_nagle_algorithm is True
