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
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:  # the core loads at the first %%agent, not at %load_ext
    from ..agentlib.agent import Agent
    from ..agentlib.background import BackgroundLoop
    from ..agentlib.events import AgentEvent
    from ..agentlib.model import ToolChoice
    from ..agentlib.result import RunResult
    from ..agentlib.tool_choice import ToolChoicePolicy

__all__ = ["MainThread", "Renderer", "run_blocking"]

T = TypeVar("T")

#: How long the main thread waits for the run to wind down after an interrupt before giving up.
CANCEL_GRACE = 5.0


class Renderer(Protocol):
    def handle(self, event: AgentEvent) -> None: ...
    def tick(self) -> None: ...
    def flush(self) -> None: ...
    def finish(self, result: RunResult | None) -> None: ...


@dataclass
class _Job:
    fn: Callable[[], Any]
    future: concurrent.futures.Future[Any]


class MainThread:
    """Lets coroutines on the worker loop run functions on the kernel's main thread.

    A job waits in one queue until the main thread takes it: a cell waiting for a run (a
    ``%%agent`` cell, ``chat.wait()``) takes it as soon as it is sent, or when it starts waiting
    if the job came first; otherwise the kernel's own event loop on the main thread (captured when
    the extension loaded) takes it once no cell blocks it. Both are woken for every job and
    whichever comes first runs it, so a job is neither lost nor run twice, whatever the order of
    sending and waiting. Without a kernel loop or a waiting cell (terminal IPython), or when
    already on the main thread, a job runs at once in the calling thread.
    """

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        # Guards which inbox serves, against jobs sent while a wait starts or ends.
        self._lock = threading.Lock()
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
        main_loop = self._main_loop if self._main_loop is not None and self._main_loop.is_running() else None
        with self._lock:
            inbox = self._inbox
            if inbox is None and main_loop is None:
                return fn()
            self._jobs.put(_Job(fn, future))
        if inbox is not None:
            inbox.put(_WAKE)
        if main_loop is not None:
            main_loop.call_soon_threadsafe(self._run_pending_quietly)
        return await asyncio.wrap_future(future)

    def run_pending(self) -> None:
        """Run the jobs sent so far (call on the main thread)."""
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                return
            _run_job(job)

    def _run_pending_quietly(self) -> None:
        """On the kernel's own loop a Ctrl-C is the kernel's business: only the job sees it."""
        with contextlib.suppress(KeyboardInterrupt):
            self.run_pending()

    @contextlib.contextmanager
    def serving(self, inbox: queue.Queue[Any]) -> Iterator[None]:
        """While in this block, jobs wake ``inbox`` (its reader calls :meth:`run_pending` on
        :data:`_WAKE`). A wait inside a job (code that waits for a chat) hands back to the outer
        wait when it ends."""
        with self._lock:
            outer, self._inbox = self._inbox, inbox
        inbox.put(_WAKE)  # jobs sent before this wait began: the blocked kernel loop cannot run them
        ended = False
        try:
            yield
            ended = True
        finally:
            with self._lock:
                self._inbox = outer
            if outer is not None:
                outer.put(_WAKE)
            elif ended:
                # Sent as the wait ended and not yet run: run now rather than leave them to a
                # kernel loop that may not exist. After an interrupt they are left to the kernel
                # loop: the run is being cancelled, and so are its jobs.
                self.run_pending()

    def serve_until(self, future: concurrent.futures.Future[T], timeout: float | None = None) -> T:
        """Wait on the main thread for ``future``, running the jobs sent here meanwhile."""
        inbox: queue.Queue[Any] = queue.Queue()
        future.add_done_callback(lambda _: inbox.put(_DONE))
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.serving(inbox):
            while not future.done():
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError(f"The run did not end within {timeout} s; it goes on.")
                try:
                    item = inbox.get(timeout=0.05 if left is None else min(0.05, left))
                except queue.Empty:
                    continue
                if item is _WAKE:
                    self.run_pending()
        return future.result()


_DONE = object()
#: Put in a wait's inbox when a job is sent: the waiting main thread runs the pending jobs.
_WAKE = object()


def run_blocking(
    agent: Agent,
    prompt: str,
    *,
    renderer: Renderer,
    loop: BackgroundLoop,
    main: MainThread,
    poll: Callable[[], None] | None = None,
    attachments: Sequence[Any] = (),
    output_type: Any = None,
    tool_choice: ToolChoice | ToolChoicePolicy | None = None,
) -> tuple[RunResult | None, bool]:
    """Run ``agent`` on ``prompt`` and wait for it on this (the main) thread.

    Returns ``(result, interrupted)``; ``result`` is None only when the run could not wind down
    within :data:`CANCEL_GRACE` seconds of an interrupt. ``poll`` is called while waiting, for
    front ends whose widget messages must be pumped by hand. ``output_type`` asks for a typed
    answer (``result.output``, see ``Agent.run``); ``tool_choice`` replaces the agent's for
    this run.
    """
    inbox: queue.Queue[Any] = queue.Queue()
    subscription = agent.on("*", inbox.put)
    interrupted = False
    deadline: float | None = None
    try:
        with main.serving(inbox):
            run = agent.run(prompt, attachments=attachments, output_type=output_type, tool_choice=tool_choice)
            future = loop.submit(run)
            future.add_done_callback(lambda _: inbox.put(_DONE))
            while True:
                try:
                    item = inbox.get(timeout=0.05)
                    if item is _DONE:
                        break
                    if item is _WAKE:
                        # A job may hold the main thread a while (a cell the agent runs): the
                        # page first gets all it was due, the run's Stop button included.
                        renderer.flush()
                        main.run_pending()
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
                if item is _WAKE:
                    main.run_pending()
                elif item is not _DONE:
                    renderer.handle(item)
    finally:
        subscription.remove()
    result = future.result() if future.done() and not future.cancelled() else None
    renderer.finish(result)
    return result, interrupted


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
