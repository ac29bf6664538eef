"""An event loop in a daemon thread, for running agents from synchronous code.

Used by the kernel layer (the ``%%agent`` cell waits on its main thread while the model I/O runs
here) and by the chat widget (runs start from button clicks while the kernel is idle). One loop
serves every run, so HTTP clients and loaded models persist between them. Stopping the loop
closes them: the loop shuts down its async generators first, as ``asyncio.run`` does (the HTTP
clients close there, see :mod:`.providers._clients`). The process-wide loop stops at exit, so
servers see the connections end rather than vanish.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["BackgroundLoop"]

T = TypeVar("T")

#: Seconds the loop's async generators (open streams, HTTP clients) get to close when it stops.
_SHUTDOWN_TIMEOUT = 3.0


class BackgroundLoop:
    """One event loop in a daemon thread, started on first use."""

    def __init__(self, name: str = "ipyagent-loop") -> None:
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._loop.is_closed():
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def serve() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    try:
                        loop.run_forever()
                    finally:
                        try:
                            with contextlib.suppress(asyncio.TimeoutError):
                                loop.run_until_complete(
                                    asyncio.wait_for(loop.shutdown_asyncgens(), _SHUTDOWN_TIMEOUT)
                                )
                        finally:
                            loop.close()

                self._thread = threading.Thread(target=serve, name=self._name, daemon=True)
                self._thread.start()
                ready.wait()
                self._loop = loop
            return self._loop

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run ``coro`` on the loop; the returned future can be waited on from any thread."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def stop(self) -> None:
        """Stop and close the loop; a later use starts a new one."""
        with self._lock:
            if self._loop is not None and not self._loop.is_closed():
                self._loop.call_soon_threadsafe(self._loop.stop)
                if self._thread is not None:
                    self._thread.join(timeout=5)
            self._loop, self._thread = None, None


_shared: BackgroundLoop | None = None


def shared_loop() -> BackgroundLoop:
    """The process-wide background loop (the kernel's runs and chat widgets share it)."""
    global _shared
    if _shared is None:
        _shared = BackgroundLoop()
        atexit.register(_shared.stop)
    return _shared
