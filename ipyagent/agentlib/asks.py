"""What reaches a run from a person while it runs: answers to its questions, and more input.

The run awaits a future per question (permission prompts, ask-user questions); the answer may
come from any thread (a widget's comm handler runs off the kernel's main thread), so
:meth:`PendingAnswers.resolve` hops onto the loop with ``call_soon_threadsafe``. Input sent
with ``agent.send`` waits in an :class:`Inbox` until the run takes it between turns.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

__all__ = ["Inbox", "PendingAnswers"]


class PendingAnswers:
    def __init__(self) -> None:
        self._futures: dict[str, asyncio.Future[Any]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: int | None = None

    def open(self, key: str) -> asyncio.Future[Any]:
        """Start waiting for ``key``. Open it *before* announcing the question: a listener may
        answer synchronously, inside the announcement."""
        loop = asyncio.get_running_loop()
        self._loop, self._thread = loop, threading.get_ident()
        future: asyncio.Future[Any] = loop.create_future()
        self._futures[key] = future
        return future

    async def wait(self, key: str, future: asyncio.Future[Any]) -> Any:
        try:
            return await future
        finally:
            self._futures.pop(key, None)

    def resolve(self, key: str, value: Any) -> bool:
        """Answer question ``key``; False when nothing is waiting for it."""
        loop = self._loop
        if key not in self._futures or loop is None:
            return False
        if threading.get_ident() == self._thread:
            self._set(key, value)
        else:
            loop.call_soon_threadsafe(self._set, key, value)
        return True

    def _set(self, key: str, value: Any) -> None:
        future = self._futures.get(key)
        if future is not None and not future.done():
            future.set_result(value)


class Inbox:
    """Text queued for the run in flight, from any thread; the run takes it all at once."""

    def __init__(self) -> None:
        self._texts: list[str] = []
        self._lock = threading.Lock()

    def put(self, text: str) -> None:
        with self._lock:
            self._texts.append(text)

    def take(self) -> str:
        """Everything queued, joined into one text ("" when nothing is)."""
        with self._lock:
            texts, self._texts = self._texts, []
        return "\n\n".join(texts)
