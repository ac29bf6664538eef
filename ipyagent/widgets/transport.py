"""Sending patches to the front end: batched, at most one message per interval.

Jupyter Server drops messages past its iopub rate limit and a browser lags behind thousands of
messages per second (shared/reference/jupyter-testing.md), so a view never sends one message per
token: patches pile up in the reducer and go out together every ``interval`` seconds. Tests
switch the throttle off with ``interval=0``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from .reducer import ViewReducer
from .view_state import PatchesMessage

__all__ = ["Throttle"]

#: ~20 messages a second: smooth to the eye, far below the server's rate limit.
DEFAULT_INTERVAL = 0.05


class Throttle:
    def __init__(
        self,
        reducer: ViewReducer,
        send: Callable[[PatchesMessage], object],
        *,
        interval: float = DEFAULT_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._reducer = reducer
        self._send = send
        self.interval = interval
        self._clock = clock
        self._last = float("-inf")
        self.messages = 0

    def tick(self) -> None:
        """Send what is pending if the interval has passed since the last message."""
        if self._reducer.has_pending and self._clock() - self._last >= self.interval:
            self.flush()

    def flush(self) -> None:
        batch = self._reducer.take()
        if batch is None:
            return
        seq, patches = batch
        message: PatchesMessage = {"kind": "patches", "seq": seq, "patches": patches}
        self._send(message)
        self._last = self._clock()
        self.messages += 1
