"""Jobs that tools send to the kernel's main thread, whatever the order of sending and waiting.

A coroutine driving ``asyncio.run`` stands for the kernel: its loop is running but blocked while
the coroutine's synchronous body (a cell) executes, as the kernel's loop is during a cell.
The orderings are forced with events, never with sleeps; the timeouts only bound a failure.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest

from ipyagent.agentlib.background import BackgroundLoop
from ipyagent.kernel.runner import MainThread

#: Seconds a failing wait takes to fail (the passing ones end as soon as the work is done).
BOUND = 10.0


@pytest.fixture
def worker() -> Any:
    loop = BackgroundLoop(name="test-main-thread")
    yield loop
    loop.stop()


def in_a_cell(body: Callable[[MainThread], None]) -> None:
    """Run ``body`` as a cell does: on the main thread, blocking the kernel's running loop."""

    async def kernel() -> None:
        body(MainThread())  # created on the running loop, as at %load_ext

    asyncio.run(kernel())


def on_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


async def send_then_signal(main: MainThread, fn: Callable[[], Any], sent: threading.Event) -> Any:
    """``await main.run(fn)``, setting ``sent`` once the job has been handed over."""
    task = asyncio.ensure_future(main.run(fn))
    await asyncio.sleep(0)  # the task runs up to its first await: the job is sent
    sent.set()
    return await task


def test_a_job_sent_before_the_wait_begins_runs_in_that_wait(worker: BackgroundLoop) -> None:
    # chat.submit() then chat.wait() in one cell: the run's first tool may send its job before
    # wait() starts serving. The kernel's loop cannot run it (this cell blocks it): wait() must.
    def cell(main: MainThread) -> None:
        sent = threading.Event()
        future = worker.submit(send_then_signal(main, on_main_thread, sent))
        assert sent.wait(BOUND)
        assert main.serve_until(future, timeout=BOUND) is True

    in_a_cell(cell)


def test_a_wait_inside_a_job_hands_the_main_thread_back_to_the_outer_wait(
    worker: BackgroundLoop,
) -> None:
    # Code a tool runs on the main thread may itself wait for a chat (run_python: chat.wait()).
    # When that inner wait ends, the outer run's next job must still reach the outer wait.
    def cell(main: MainThread) -> None:
        async def inner() -> str:
            return await main.run(lambda: "inner")

        async def outer() -> tuple[str, bool]:
            first = await main.run(lambda: main.serve_until(worker.submit(inner()), timeout=BOUND))
            return first, await main.run(on_main_thread)

        assert main.serve_until(worker.submit(outer()), timeout=BOUND) == ("inner", True)

    in_a_cell(cell)


def test_without_a_kernel_loop_a_job_runs_where_it_is_sent(worker: BackgroundLoop) -> None:
    # Terminal IPython, no wait in progress: nothing would serve a queued job, so it runs at once.
    main = MainThread()
    assert worker.submit(main.run(on_main_thread)).result(BOUND) is False
