"""A cell's outputs as ``run_cell`` runs it: sent to the page as they come, so the cell shows
them as if the user had run it.

The cell runs on the kernel's main thread, inside a ``%%agent`` cell that holds the shell: the
kernel cannot execute a request for the target cell, so the code runs in-process (as
``run_python`` does) and its outputs, which would otherwise land in the ``%%agent`` cell, are
captured and sent over the live-notebook channel as ``cell_outputs`` notices. Streams are sent
at most every :data:`INTERVAL` seconds (a timer sends what a quiet stretch left waiting), so a
loop that prints a line a millisecond costs the page a few updates a second, not thousands.
"""

from __future__ import annotations

import contextlib
import io
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from ..live_protocol import CellOutputsParams

__all__ = ["INTERVAL", "CellOutputs", "forwarding_capture"]

#: Seconds between two notices while the cell runs.
INTERVAL = 0.1


class CellOutputs:
    """The outputs of one run of one cell, forwarded through ``send`` (which says whether a page
    took them); thread-safe: the cell writes on the main thread, the timer flushes on its own."""

    def __init__(self, cell_id: str, send: Callable[[CellOutputsParams], bool]) -> None:
        self.cell_id = cell_id
        self._send = send
        self._lock = threading.Lock()
        self._pending: list[dict[str, Any]] = []
        self._reset = True
        self._last = 0.0
        self._timer: threading.Timer | None = None
        #: Whether every notice reached a page.
        self.delivered = True

    def begin(self) -> None:
        """The cell starts: its old outputs go and its prompt shows ``[*]``."""
        self._flush(running=True)

    def stream(self, name: str, text: str) -> None:
        if not text:
            return
        with self._lock:
            last = self._pending[-1] if self._pending else None
            if last is not None and last["output_type"] == "stream" and last["name"] == name:
                last["text"] += text
            else:
                self._pending.append({"output_type": "stream", "name": name, "text": text})
        self._soon()

    def display(self, data: dict[str, Any], metadata: dict[str, Any]) -> None:
        self._add({"output_type": "display_data", "data": dict(data), "metadata": dict(metadata)})

    def result(self, data: dict[str, Any], metadata: dict[str, Any], count: int) -> None:
        output = {"output_type": "execute_result", "data": dict(data), "metadata": dict(metadata)}
        self._add({**output, "execution_count": count})

    def error(self, ename: str, evalue: str, traceback: list[str]) -> None:
        self._add({"output_type": "error", "ename": ename, "evalue": evalue, "traceback": traceback})

    def end(self, execution_count: int | None) -> None:
        """The cell ended: what is left, its execution count, and ``[*]`` off."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
        self._flush(running=False, execution_count=execution_count)

    def _add(self, output: dict[str, Any]) -> None:
        with self._lock:
            self._pending.append(output)
        self._soon()

    def _soon(self) -> None:
        with self._lock:
            wait = INTERVAL - (time.monotonic() - self._last)
            if wait > 0:
                if self._timer is None:
                    self._timer = threading.Timer(wait, self._flush_from_timer)
                    self._timer.daemon = True
                    self._timer.start()
                return
        self._flush(running=True)

    def _flush_from_timer(self) -> None:
        with self._lock:
            self._timer = None
        self._flush(running=True)

    def _flush(self, *, running: bool, execution_count: int | None = None) -> None:
        with self._lock:
            outputs, self._pending = self._pending, []
            reset, self._reset = self._reset, False
            self._last = time.monotonic()
        if not outputs and not reset and running:
            return
        params = CellOutputsParams(
            cell_id=self.cell_id,
            reset=reset,
            outputs=outputs,
            running=running,
            execution_count=execution_count,
        )
        if not self._send(params):
            self.delivered = False


class _Tee(io.StringIO):
    """A captured stream that also hands each write to the cell's outputs."""

    def __init__(self, name: str, sink: CellOutputs) -> None:
        super().__init__()
        self.name = name
        self._sink = sink

    def write(self, text: str) -> int:
        written = super().write(text)
        self._sink.stream(self.name, text)
        return written


@contextlib.contextmanager
def forwarding_capture(shell: Any, sink: CellOutputs) -> Iterator[Any]:
    """Like IPython's ``capture_output``, with every write and display also sent to ``sink``."""
    from IPython.core.displayhook import CapturingDisplayHook
    from IPython.core.displaypub import CapturingDisplayPublisher
    from IPython.utils.capture import CapturedIO

    class Publisher(CapturingDisplayPublisher):
        def publish(
            self,
            data: Any,
            metadata: Any = None,
            source: Any = None,
            *,
            transient: Any = None,
            update: Any = False,
            **kwargs: Any,
        ) -> None:
            super().publish(data, metadata, source, transient=transient, update=update, **kwargs)  # type: ignore[no-untyped-call]
            sink.display(data, metadata or {})

    publisher = Publisher()  # type: ignore[no-untyped-call]
    stdout, stderr = _Tee("stdout", sink), _Tee("stderr", sink)
    saved = sys.stdout, sys.stderr, shell.display_pub, sys.displayhook
    sys.stdout, sys.stderr = stdout, stderr
    shell.display_pub = publisher
    sys.displayhook = CapturingDisplayHook(shell=shell, outputs=publisher.outputs)  # type: ignore[no-untyped-call]
    try:
        yield CapturedIO(stdout, stderr, publisher.outputs)
    finally:
        sys.stdout, sys.stderr, shell.display_pub, sys.displayhook = saved
