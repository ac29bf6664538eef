"""Questions waiting for a person: permission prompts and ask-user questions.

The run awaits a future per question; the answer may come from any thread (a widget's comm
handler runs off the kernel's main thread), so :meth:`PendingAnswers.resolve` hops onto the
loop with ``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

__all__ = ["PendingAnswers"]


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
