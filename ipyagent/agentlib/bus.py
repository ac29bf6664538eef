"""The event bus of an agent: listeners registered with ``agent.on(...)`` and live streams.

Emitting is synchronous and cheap — it sits on the per-token path. A listener that raises is
logged and skipped (a broken display must not break the run); an async listener is scheduled
as a task on the running loop.

A sub-agent's run gets a bus of its own, :meth:`EventBus.nested`: what it emits goes on to the
parent's bus marked with the delegate call it came through (``event.via``), and whoever can
answer the parent's questions (a listener by name, a stream) answers the child's.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import warnings
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from .errors import UserError
from .events import EVENT_TYPES, RETIRED_TYPES, AgentEvent

__all__ = ["EventBus", "Listener", "Subscription"]

log = logging.getLogger("ipyagent")
#: The events that end a run.
_TERMINAL = frozenset({"run_finished", "run_failed", "run_cancelled"})

Listener = Callable[[Any], Any]
_ALL = "*"


@dataclass(eq=False)
class Subscription:
    """Returned by ``agent.on``: call :meth:`remove` (or use it as a context manager) to stop."""

    _bus: EventBus
    #: The event type listened to (``"*"`` for all).
    event_type: str
    listener: Listener

    def remove(self) -> None:
        self._bus.remove(self)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


class EventBus:
    def __init__(self) -> None:
        self._listeners: dict[str, list[Subscription]] = {}
        self._streams: list[asyncio.Queue[AgentEvent | None]] = []
        self._tasks: set[asyncio.Task[Any]] = set()

    def on(self, event: str | type[BaseModel], listener: Listener) -> Subscription:
        key = _key(event)
        sub = Subscription(self, key, listener)
        self._listeners.setdefault(key, []).append(sub)
        return sub

    def remove(self, sub: Subscription) -> None:
        subs = self._listeners.get(sub.event_type, [])
        if sub in subs:
            subs.remove(sub)

    def has_listener(self, event_type: str) -> bool:
        """Whether someone listens to this event type *by name*: a catch-all ("*") listener —
        a logger, a renderer — is not taken to answer questions."""
        return bool(self._listeners.get(event_type))

    @property
    def has_stream(self) -> bool:
        return bool(self._streams)

    def open_stream(self) -> asyncio.Queue[AgentEvent | None]:
        queue: asyncio.Queue[AgentEvent | None] = asyncio.Queue()
        self._streams.append(queue)
        return queue

    def close_stream(self, queue: asyncio.Queue[AgentEvent | None]) -> None:
        if queue in self._streams:
            self._streams.remove(queue)

    async def stream_run(
        self, run: Awaitable[Any], *, cancel: Callable[[], Any]
    ) -> AsyncGenerator[AgentEvent, None]:
        """Start ``run`` and yield every event of this bus until the run's own end (a
        sub-agent's end is not it); leaving early calls ``cancel`` and waits for the run."""
        queue = self.open_stream()
        task = asyncio.ensure_future(run)
        task.add_done_callback(lambda _: queue.put_nowait(None))
        try:
            while (event := await queue.get()) is not None:
                yield event
                if event.type in _TERMINAL and not event.via:
                    break
            await task
        finally:
            self.close_stream(queue)
            if not task.done():
                cancel()
                await asyncio.wait({task})

    def nested(self, call_id: str) -> EventBus:
        """A bus for the sub-agent that the call ``call_id`` starts: its events reach this bus
        with ``call_id`` put before their ``via``; its questions are answerable when this bus's are."""
        return _NestedBus(self, call_id)

    def emit(self, event: AgentEvent) -> None:
        for queue in self._streams:
            queue.put_nowait(event)
        for key in (event.type, _ALL):
            for sub in self._listeners.get(key, ()):
                self._call(sub, event)

    def _call(self, sub: Subscription, event: AgentEvent) -> None:
        try:
            result = sub.listener(event)
            if inspect.isawaitable(result):
                task = asyncio.ensure_future(result)
                self._tasks.add(task)
                task.add_done_callback(self._task_done)
        except Exception:
            log.exception("ipyagent: a listener for %r raised; it was skipped", event.type)

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("ipyagent: an async listener raised", exc_info=task.exception())


class _NestedBus(EventBus):
    def __init__(self, parent: EventBus, call_id: str) -> None:
        super().__init__()
        self.parent = parent
        self.call_id = call_id

    def has_listener(self, event_type: str) -> bool:
        return super().has_listener(event_type) or self.parent.has_listener(event_type)

    @property
    def has_stream(self) -> bool:
        return bool(self._streams) or self.parent.has_stream

    def emit(self, event: AgentEvent) -> None:
        # The parent's listeners see the event first, then the child's own: the one that counts
        # the child's usage as the parent's emits the parent's usage event after the child's.
        self.parent.emit(event.model_copy(update={"via": (self.call_id, *event.via)}))
        super().emit(event)


def _key(event: str | type[BaseModel]) -> str:
    if isinstance(event, str):
        if event in RETIRED_TYPES:
            new = RETIRED_TYPES[event]
            warnings.warn(
                f"The event type {event!r} is now {new!r}; the old name goes away in the next release.",
                DeprecationWarning,
                stacklevel=4,
            )
            return new
        if event != _ALL and event not in EVENT_TYPES:
            raise UserError(
                f"Unknown event type {event!r}.",
                hint=f"Use '*' for every event, or one of: {', '.join(sorted(EVENT_TYPES))}.",
                code="unknown_event",
            )
        return event
    for key, cls in EVENT_TYPES.items():
        if cls is event:
            return key
    raise UserError(f"{event!r} is not an event class.", hint="Pass e.g. TextDelta or 'text_delta'.")
