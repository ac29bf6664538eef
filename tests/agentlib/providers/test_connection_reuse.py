"""One HTTP client per endpoint and event loop: the turns of a conversation share one connection,
the agents of an endpoint share it too, closing (the last agent, the loop) ends it, and a
connection the server dropped between turns is never the user's problem.

A keep-alive loopback server counts the TCP connections it accepted and those the client closed.
"""

from __future__ import annotations

import asyncio
import gc
import json
import sys
import warnings
from collections.abc import AsyncIterator
from typing import Any

import pytest
from wire_server import Reply, WireServer
from wire_transcripts import chunk, sse

from ipyagent.agentlib.agent import Agent
from ipyagent.agentlib.background import BackgroundLoop
from ipyagent.agentlib.endpoints import register_endpoint
from ipyagent.agentlib.events import AgentEvent
from ipyagent.agentlib.retry import RetryPolicy
from ipyagent.agentlib.tools import tool


@tool(read_only=True)
def capital(country: str) -> str:
    """The capital of a country."""
    return {"France": "Paris", "Japan": "Tokyo"}.get(country, "unknown")


def calls(country: str, call_id: str) -> Reply:
    arguments = json.dumps({"country": country})
    delta = {"role": "assistant", "tool_calls": [{"index": 0, "id": call_id, "type": "function",
             "function": {"name": "capital", "arguments": arguments}}]}  # fmt: skip
    return Reply(sse(chunk(delta), chunk({}, "tool_calls")))


def says(text: str) -> Reply:
    return Reply(sse(chunk({"role": "assistant", "content": text}), chunk({}, "stop")))


@pytest.fixture
async def server() -> AsyncIterator[WireServer]:
    srv = WireServer(keep_alive=True)
    await srv.start()
    register_endpoint("wire", kind="openai", base_url=srv.base_url)
    yield srv
    await srv.stop()


def agent(**options: Any) -> Agent:
    # No retries by the loop: a dropped connection would show as a failed run.
    return Agent(model="wire/m", tools=[capital], retry=RetryPolicy(attempts=1), **options)


def warnings_of(a: Agent) -> list[AgentEvent]:
    seen: list[AgentEvent] = []
    a.on("run_warning", seen.append)
    return seen


async def test_a_run_of_three_turns_with_tool_calls_uses_one_connection(server: WireServer) -> None:
    server.queue(calls("France", "call_1"), calls("Japan", "call_2"), says("Paris and Tokyo."))
    a = agent()
    result = await a.run("Capitals of France and Japan?")
    assert (result.status, result.text) == ("completed", "Paris and Tokyo.")
    assert len(server.requests) == 3
    assert server.connections == 1

    server.queue(says("Still here."))
    assert (await a.run("And now?")).text == "Still here."  # the next run too
    assert (server.connections, server.client_closed) == (1, 0)

    a.close()
    await server.wait_for(lambda: server.client_closed == 1)  # the server sees EOF


async def test_agents_of_one_endpoint_share_its_connection_until_the_last_closes(
    server: WireServer,
) -> None:
    first, second = agent(), agent()
    server.queue(says("one"), says("two"))
    assert (await first.run("hi")).text == "one"
    assert (await second.run("hi")).text == "two"
    assert server.connections == 1

    first.close()
    server.queue(says("three"))
    assert (await second.run("again")).text == "three"  # first's close left it open for second
    assert (server.connections, server.client_closed) == (1, 0)

    second.close()
    await server.wait_for(lambda: server.client_closed == 1)


async def test_a_server_restart_between_turns_goes_unnoticed(server: WireServer) -> None:
    a = agent()
    seen = warnings_of(a)
    server.queue(says("before"))
    assert (await a.run("hi")).text == "before"
    await server.stop()
    await server.start(server.port)
    server.queue(says("after"))
    result = await a.run("hi again")
    assert (result.status, result.text) == ("completed", "after")
    assert seen == []  # not even a "retrying" warning
    assert server.connections == 2
    a.close()


async def test_a_connection_dropped_as_the_request_goes_out_is_sent_again(server: WireServer) -> None:
    # The server reads turn 2's request on the kept-alive connection, then closes it unanswered:
    # what a keep-alive timeout racing the request looks like from the client.
    a = agent()
    seen = warnings_of(a)
    server.queue(says("one"), Reply(fault="drop"), says("two"))
    assert (await a.run("hi")).text == "one"
    result = await a.run("hi again")
    assert (result.status, result.text) == ("completed", "two")
    assert seen == []
    assert (len(server.requests), server.connections) == (3, 2)
    a.close()


async def test_a_new_connection_dropped_is_an_error_not_sent_again(server: WireServer) -> None:
    # On a connection opened for it, no answer is the server's answer: the loop's retry policy
    # (here: none) decides, and the user is told.
    a = agent()
    server.queue(Reply(fault="drop"))
    result = await a.run("hi")
    assert result.status == "failed" and result.error is not None
    assert result.error.code == "connection_closed"
    assert len(server.requests) == 1
    a.close()


async def test_changing_the_proxy_environment_takes_effect_at_the_next_request(
    server: WireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = agent()
    server.queue(says("one"), says("two"))
    assert (await a.run("hi")).text == "one"
    monkeypatch.setenv("NO_PROXY", "example.invalid")  # httpx reads it when a client is built
    assert (await a.run("hi")).text == "two"
    assert server.connections == 2
    a.close()


async def test_stopping_the_background_loop_closes_its_connections(server: WireServer) -> None:
    # The kernel's runs happen on a BackgroundLoop; unloading the extension (or exiting) stops it.
    background = BackgroundLoop(name="test-http-loop")
    a = agent()
    server.queue(says("one"), says("two"))
    for expected in ("one", "two"):
        result = await asyncio.wrap_future(background.submit(a.run("hi")))
        assert result.text == expected
    assert (server.connections, server.client_closed) == (1, 0)
    await asyncio.to_thread(background.stop)
    await server.wait_for(lambda: server.client_closed == 1)


def test_run_sync_twice_outside_a_loop_opens_and_closes_a_client_per_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each run_sync is an asyncio.run on a new loop: a client from the first must not be used on
    # the second ("Event loop is closed"), and each must be closed before its loop is (no
    # ResourceWarning for a socket left open).
    serving = BackgroundLoop(name="test-wire-server")
    srv = WireServer(keep_alive=True)
    serving.submit(srv.start()).result(timeout=10)
    register_endpoint("wire", kind="openai", base_url=srv.base_url)
    srv.queue(says("one"), says("two"))
    unraisable: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            a = agent()
            assert a.run_sync("hi").text == "one"
            assert a.run_sync("hi").text == "two"
            gc.collect()
        assert [str(w.message) for w in caught] == []
        assert unraisable == []
        assert srv.connections == 2
        serving.submit(srv.wait_for(lambda: srv.client_closed == 2)).result(timeout=15)
    finally:
        serving.submit(srv.stop()).result(timeout=10)
        serving.stop()
