"""Worker threads for sync tools and sync policies, which a stuck call cannot starve.

A sync function (a tool, a policy) runs in a thread so the event loop stays live. When it
overruns its timeout the loop stops waiting, but nothing can stop the thread: it runs until the
function returns, perhaps never (a lock another process holds, a socket without a timeout). In
asyncio's default executor each such call keeps one of its few workers (``min(32, cpus + 4)``,
six on two cores) for good; after a handful every later sync call of every agent of the kernel
waits behind them and times out too, and so does anything else that uses that executor (a
host name lookup, for one).

A :class:`WorkerPool` tells its *healthy* workers apart from the threads it gave up on. When the
caller of a call stops waiting (its timeout, a cancelled run), the thread that runs the call is
marked abandoned: it no longer counts as a worker, and the next call that needs one starts a new
one, so the pool keeps its full number of workers for calls that return. An abandoned thread
finishes its call whenever it can (its answer is dropped) and then ends. Workers are daemon
threads: one blocked forever does not keep the process from exiting.

At most ``max_abandoned`` threads may be abandoned at a time (each holds a stack, and whatever
its call holds). Past that, a stuck worker is no longer replaced: the pool shrinks by one worker
per further stuck call, and once it has none left a call fails at once with
:class:`WorkersExhausted`, which says how many calls are stuck and in what — until some of them
return, or the process restarts.

This module owns the threads and nothing else: timeouts are the caller's (``asyncio.wait_for``
around :meth:`WorkerPool.run`).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import threading
from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TypeVar

from .errors import RunError

__all__ = ["MAX_ABANDONED", "WorkerPool", "WorkersExhausted", "policy_workers", "tool_workers"]

T = TypeVar("T")

#: Threads a pool may have abandoned at once before it stops replacing stuck workers.
MAX_ABANDONED = 64

_State = Literal["queued", "running", "done", "dropped", "abandoned"]


class WorkersExhausted(RunError):
    """Every worker of a pool is stuck in a call that never returned, and no more may start."""


class _Call:
    __slots__ = ("args", "context", "fn", "future", "kwargs", "label", "loop", "state", "thread")

    def __init__(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        label: str,
        loop: asyncio.AbstractEventLoop,
        future: asyncio.Future[Any],
    ) -> None:
        self.fn, self.args, self.kwargs, self.label = fn, args, kwargs, label
        self.loop, self.future = loop, future
        self.context = contextvars.copy_context()  # as asyncio.to_thread does
        self.state: _State = "queued"
        self.thread: threading.Thread | None = None


class WorkerPool:
    """Threads that run sync calls for the event loop; see the module docstring.

    Args:
        name: Names the threads (``ipyagent-<name>-3``) and the pool in errors.
        workers: Healthy workers at most (default: ``min(32, cpus + 4)``, as asyncio's).
        max_abandoned: Threads that may be abandoned at once (default :data:`MAX_ABANDONED`).
    """

    def __init__(self, name: str, *, workers: int | None = None, max_abandoned: int = MAX_ABANDONED) -> None:
        self.name = name
        self.size = workers if workers is not None else min(32, (os.cpu_count() or 1) + 4)
        self.max_abandoned = max_abandoned
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._queue: deque[_Call] = deque()
        self._healthy = 0  # started, not abandoned
        self._idle = 0  # healthy and not running a call
        self._abandoned: dict[threading.Thread, str] = {}
        self._started = 0

    @property
    def abandoned(self) -> int:
        """Threads given up on whose call has not returned yet."""
        with self._lock:
            return len(self._abandoned)

    @property
    def workers(self) -> int:
        """Healthy workers started so far."""
        with self._lock:
            return self._healthy

    async def run(
        self,
        fn: Callable[..., T],
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        *,
        label: str = "",
    ) -> T:
        """``fn(*args, **kwargs)`` in a worker; if this coroutine is cancelled (a timeout), the
        call is dropped if it has not started, and its thread abandoned if it has. ``label``
        says what the call is (a tool's name) in :class:`WorkersExhausted`."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        name = label or getattr(fn, "__qualname__", "a call")
        call = _Call(fn, tuple(args), dict(kwargs or {}), name, loop, future)
        with self._lock:
            self._queue.append(call)
            self._start_workers()
            if not self._healthy:
                self._queue.remove(call)
                raise self._exhausted()
            self._wake.notify()
        try:
            return await future
        except asyncio.CancelledError:
            self._abandon(call)
            raise

    def _start_workers(self) -> None:
        """Start workers for the calls no idle worker will take (lock held)."""
        while (
            len(self._queue) > self._idle
            and self._healthy < self.size
            and len(self._abandoned) < self.max_abandoned
        ):
            self._started += 1
            self._healthy += 1
            self._idle += 1  # until it takes a call: what it will take is not another's to start for
            thread = threading.Thread(
                target=self._work, name=f"ipyagent-{self.name}-{self._started}", daemon=True
            )
            thread.start()

    def _abandon(self, call: _Call) -> None:
        with self._lock:
            if call.state == "queued":
                call.state = "dropped"  # a worker skips it
                return
            if call.state != "running" or call.thread is None:
                return
            call.state = "abandoned"
            self._healthy -= 1
            self._abandoned[call.thread] = call.label
            self._start_workers()  # calls waiting behind it get a worker of their own
            if not self._healthy:  # past the cap, and the last worker is stuck too
                error = self._exhausted()
                while self._queue:
                    waiting = self._queue.popleft()
                    if waiting.state == "queued":
                        waiting.state = "done"
                        _deliver(waiting, None, error)

    def _exhausted(self) -> WorkersExhausted:
        stuck = Counter(self._abandoned.values())
        what = ", ".join(f"{label} ×{n}" if n > 1 else label for label, n in stuck.most_common(5))
        return WorkersExhausted(
            f"No {self.name} worker is free: {len(self._abandoned)} calls that timed out are still "
            f"running in their threads ({what}), and no more threads may be started.",
            hint="Restart the kernel to end them. Find out why those calls never return (a lock held "
            "by another process, a network call without a timeout) and give them a deadline.",
            code="workers_exhausted",
        )

    def _work(self) -> None:
        me = threading.current_thread()
        while True:
            with self._lock:
                while not self._queue:
                    self._wake.wait()
                call = self._queue.popleft()
                if call.state != "queued":
                    continue
                call.state, call.thread = "running", me
                self._idle -= 1
            value: Any = None
            error: BaseException | None = None
            try:
                value = call.context.run(call.fn, *call.args, **call.kwargs)
            except BaseException as exc:  # handed to the caller, as an executor would
                error = exc
            with self._lock:
                # The caller may have abandoned it meanwhile (under the lock, in _abandon).
                abandoned = call.state == "abandoned"  # type: ignore[comparison-overlap]
                call.state = "done"
                if abandoned:
                    # Its place was taken: this thread ends, and makes room under the cap.
                    del self._abandoned[me]
                    self._start_workers()
                    return
                self._idle += 1
            _deliver(call, value, error)
            del call, value, error  # hold nothing of a finished call while idle


def _deliver(call: _Call, value: Any, error: BaseException | None) -> None:
    def settle() -> None:
        if call.future.done():
            return
        if error is not None:
            call.future.set_exception(error)
        else:
            call.future.set_result(value)

    with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
        call.loop.call_soon_threadsafe(settle)


_pools: dict[str, WorkerPool] = {}
_pools_lock = threading.Lock()


def _pool(name: str) -> WorkerPool:
    with _pools_lock:
        pool = _pools.get(name)
        if pool is None:
            pool = _pools[name] = WorkerPool(name)
        return pool


def tool_workers() -> WorkerPool:
    """The process's pool for sync tools (and the tools' own blocking reads)."""
    return _pool("tool")


def policy_workers() -> WorkerPool:
    """The process's pool for sync policies: apart from the tools', so that stuck tools never
    hold up a policy's answer, nor stuck policies a tool."""
    return _pool("policy")
