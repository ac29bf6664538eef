"""Sending patches to the front end: batched, at most one message per interval.

Jupyter Server drops messages past its iopub rate limit and a browser lags behind thousands of
messages per second (shared/reference/jupyter-testing.md), so a view never sends one message per
token: patches pile up in the reducer and go out together every ``interval`` seconds. Tests
switch the throttle off with ``interval=0``.

The patches carry a run's text to the front end once; :func:`write_quietly` keeps the kernel's
copy of the whole state without sending that text again.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from .reducer import ViewReducer
from .view_state import PatchesMessage

__all__ = ["Throttle", "write_quietly"]

#: ~20 messages a second: smooth to the eye, far below the server's rate limit.
#: Seconds between a view's messages when none is given. A benchmark of the unbatched case sets
#: it to 0 in the kernel it measures; it is not a user setting.
DEFAULT_INTERVAL = 0.05


class Throttle:
    def __init__(
        self,
        reducer: ViewReducer,
        send: Callable[[PatchesMessage], object],
        *,
        interval: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._reducer = reducer
        self._send = send
        self.interval = DEFAULT_INTERVAL if interval is None else interval
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


def write_quietly(widget: Any, name: str, value: Any) -> None:
    """Set a synced trait without sending it: for a value the front end has already.

    The front end built the view state from the patches; writing the trait keeps the kernel's
    copy whole (a page loaded later asks for it) without sending the run's text again. This is
    ipywidgets' own guard against echoing a value back to the front end that sent it.
    """
    lock = getattr(widget, "_lock_property", None)
    if lock is None:  # not ipywidgets' Widget: sending is the safe default
        setattr(widget, name, value)
        return
    # The lock holds the value as JSON would bring it back (tuples become lists...), as a value
    # from the front end would be, so that the comparison ipywidgets makes finds them equal.
    with lock(**{name: json.loads(json.dumps(value))}):
        setattr(widget, name, value)
