"""Running an agent from a cell that blocks until the run ends, while the cell still updates.

The model I/O runs on one asyncio loop in a daemon thread (the core's shared
:class:`~ipyagent.agentlib.background.BackgroundLoop`), shared by every run of the kernel so that
HTTP clients and loaded models persist. The kernel's main thread,
which is executing the ``%%agent`` cell, waits in :func:`run_blocking` on an inbox that carries
both the run's events (rendered on the main thread, in the cell's output context) and jobs that
must run on the main thread (user code, display hooks, matplotlib). Ctrl-C / the ■ button raises
KeyboardInterrupt in that wait: the run is cancelled and the cell ends within about a second.

Why not ``nest_asyncio`` or the kernel's own loop: see shared/reference/jupyter-testing.md — the
former broke ipykernel 7 and did not cancel on interrupt; the worker-thread loop worked on 6.x
and 7.x and cancelled cleanly.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:  # the core loads at the first %%agent, not at %load_ext
    from ..agentlib.agent import Agent
    from ..agentlib.background import BackgroundLoop
    from ..agentlib.events import AgentEvent
    from ..agentlib.result import RunResult

__all__ = ["MainThread", "Renderer", "run_blocking"]

T = TypeVar("T")

#: How long the main thread waits for the run to wind down after an interrupt before giving up.
CANCEL_GRACE = 5.0


class Renderer(Protocol):
    def handle(self, event: AgentEvent) -> None: ...
    def tick(self) -> None: ...
    def finish(self, result: RunResult | None) -> None: ...


@dataclass
class _Job:
    fn: Callable[[], Any]
    future: concurrent.futures.Future[Any]


class MainThread:
    """Lets coroutines on the worker loop run functions on the kernel's main thread.

    Jobs are delivered through the inbox of the blocking run in progress. With no blocking run
    (a chat widget's run, started while the kernel is idle) they go to the kernel's own event loop
    on the main thread, captured when the extension loaded; without one (terminal IPython, or
    already on the main thread) they run at once in the calling thread.
    """

    def __init__(self) -> None:
        self._inbox: queue.Queue[Any] | None = None
        self._thread = threading.main_thread()
        try:
            self._main_loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self._main_loop = None

    async def run(self, fn: Callable[[], T]) -> T:
        if threading.current_thread() is self._thread:
            return fn()
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        if self._inbox is not None:
            self._inbox.put(_Job(fn, future))
        elif self._main_loop is not None and self._main_loop.is_running():
            self._main_loop.call_soon_threadsafe(_run_job_quietly, _Job(fn, future))
        else:
            return fn()
        return await asyncio.wrap_future(future)

    def attach(self, inbox: queue.Queue[Any] | None) -> None:
        self._inbox = inbox

    def serve_until(self, future: concurrent.futures.Future[T], timeout: float | None = None) -> T:
        """Wait on the main thread for ``future``, running the jobs sent here meanwhile."""
        inbox: queue.Queue[Any] = queue.Queue()
        future.add_done_callback(lambda _: inbox.put(_DONE))
        deadline = None if timeout is None else time.monotonic() + timeout
        self.attach(inbox)
        try:
            while not future.done():
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError(f"The run did not end within {timeout} s; it goes on.")
                try:
                    item = inbox.get(timeout=0.05 if left is None else min(0.05, left))
                except queue.Empty:
                    continue
                if isinstance(item, _Job):
                    _run_job(item)
        finally:
            self.attach(None)
        return future.result()


_DONE = object()


def run_blocking(
    agent: Agent,
    prompt: str,
    *,
    renderer: Renderer,
    loop: BackgroundLoop,
    main: MainThread,
    poll: Callable[[], None] | None = None,
) -> tuple[RunResult | None, bool]:
    """Run ``agent`` on ``prompt`` and wait for it on this (the main) thread.

    Returns ``(result, interrupted)``; ``result`` is None only when the run could not wind down
    within :data:`CANCEL_GRACE` seconds of an interrupt. ``poll`` is called while waiting, for
    front ends whose widget messages must be pumped by hand.
    """
    inbox: queue.Queue[Any] = queue.Queue()
    subscription = agent.on("*", inbox.put)
    main.attach(inbox)
    future = loop.submit(agent.run(prompt))
    future.add_done_callback(lambda _: inbox.put(_DONE))
    interrupted = False
    deadline: float | None = None
    try:
        while True:
            try:
                item = inbox.get(timeout=0.05)
                if item is _DONE:
                    break
                if isinstance(item, _Job):
                    _run_job(item)
                else:
                    renderer.handle(item)
                renderer.tick()
                if poll is not None:
                    poll()
            except queue.Empty:
                renderer.tick()
                if poll is not None:
                    poll()
                if deadline is not None and time.monotonic() > deadline:
                    break
            except KeyboardInterrupt:
                interrupted = True
                agent.cancel()
                deadline = time.monotonic() + CANCEL_GRACE
        # Events emitted just before the run ended may still be queued behind _DONE's callback.
        while not inbox.empty():
            item = inbox.get_nowait()
            if isinstance(item, _Job):
                _run_job(item)
            elif item is not _DONE:
                renderer.handle(item)
    finally:
        main.attach(None)
        subscription.remove()
    result = future.result() if future.done() and not future.cancelled() else None
    renderer.finish(result)
    return result, interrupted


def _run_job_quietly(job: _Job) -> None:
    """On the kernel's own loop a Ctrl-C is the kernel's business: only the job sees it."""
    with contextlib.suppress(KeyboardInterrupt):
        _run_job(job)


def _run_job(job: _Job) -> None:
    if not job.future.set_running_or_notify_cancel():
        return
    try:
        job.future.set_result(job.fn())
    except KeyboardInterrupt:
        # The user stopped the code the job ran: the tool sees a plain error (a KeyboardInterrupt
        # would break the worker loop), and the wait loop cancels the run.
        job.future.set_exception(InterruptedError("Interrupted by the user (Ctrl-C / ■)."))
        raise
    except BaseException as exc:  # SystemExit included: the job's failure is the tool's result
        job.future.set_exception(exc if isinstance(exc, Exception) else RuntimeError(repr(exc)))
