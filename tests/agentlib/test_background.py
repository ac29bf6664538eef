"""The background loop: runs coroutines for synchronous callers, and closes when stopped."""

from __future__ import annotations

import asyncio
import threading
import time

from ipyagent.agentlib.background import BackgroundLoop


async def where() -> str:
    await asyncio.sleep(0)
    return threading.current_thread().name


def test_coroutines_run_on_the_loop_thread_and_the_loop_is_reused() -> None:
    background = BackgroundLoop(name="test-loop")
    try:
        assert background.submit(where()).result(timeout=5) == "test-loop"
        first = background.loop
        assert background.submit(where()).result(timeout=5) == "test-loop"
        assert background.loop is first
    finally:
        background.stop()


def test_stop_closes_the_loop_and_a_later_use_starts_a_new_one() -> None:
    background = BackgroundLoop()
    loop = background.loop
    background.stop()
    deadline = time.monotonic() + 5
    while not loop.is_closed() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert loop.is_closed(), "stop() left the event loop (and its sockets) open"
    assert background.submit(where()).result(timeout=5).startswith("ipyagent")
    assert background.loop is not loop
    background.stop()
