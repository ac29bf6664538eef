"""``run_cell``: run one cell of the notebook as the user would, from inside an agent run.

Why the code runs in-process: a ``%%agent`` cell holds the kernel's shell until its run ends, so
an execute request for the target cell (what the page sends when the user runs it) would queue
behind the agent and never start. The cell's source runs instead on the kernel's main thread, in
the user's namespace, as ``run_python`` runs code — and as if it had come from the page: it gets
the next execution count, joins ``In``/``Out``, and its outputs go to the target cell through
the live-notebook channel (:mod:`._cell_outputs`), not to the ``%%agent`` cell. The same path
serves the chat, whose runs start while the kernel is idle.

A cell that runs past ``timeout`` seconds is interrupted, and the agent reads what it printed
until then. When the run is stopped (Stop, or the kernel's interrupt) while the cell runs, the
main thread is interrupted too, so the cell ends within about a second and no run waits on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import signal
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ...agentlib.tools import ToolOutput
from ._cell_outputs import CellOutputs

if TYPE_CHECKING:
    from ...agentlib.tools import RunContext
    from ..live_protocol import CellOutputsParams
    from ..runner import MainThread
    from ..variable_checkpoint import CallCheckpoint, VariableCheckpoints

__all__ = ["CellRunner"]


class CellRunner:
    """Runs cells for one kernel's runs, numbering them as the kernel numbers cells.

    A cell run takes the next number of ``In`` (whose length is the next cell's number, idle or
    not). A cell run from inside a ``%%agent`` cell (see :meth:`inside_cell`) comes after that
    cell's number; the ``%%agent`` cell, which ends after the cells it ran, then takes the number
    after theirs: the counts on the page go up in the order things finished, each used once, and
    ``In[n]`` is what ran as ``n`` (the ``%%agent`` cell's source is recorded again under its new
    number). Its count is set for both IPython 9 (which moves ``execution_count`` on when a cell
    starts) and earlier releases (which move it on when the cell ends)."""

    def __init__(self, shell: Any, main: MainThread, variables: VariableCheckpoints | None = None) -> None:
        self.shell = shell
        self.main = main
        #: The kernel's variable checkpoints: a cell a run runs is part of the run's undo.
        self.variables = variables
        self._ran = 0

    def _next_count(self) -> int:
        return len(self.shell.history_manager.input_hist_parsed)

    @contextlib.contextmanager
    def inside_cell(self, raw_cell: str) -> Iterator[None]:
        """The block runs inside the executing cell ``raw_cell`` (a ``%%agent`` cell)."""
        shell = self.shell
        # 1 where IPython counted this cell when it started (so the reply says count - 1), else 0.
        counted_at_start = int(shell.execution_count) - (self._next_count() - 1)
        self._ran = 0
        try:
            yield
        finally:
            if self._ran:
                count = self._next_count()
                with contextlib.suppress(Exception):  # a failing history database must not fail the cell
                    shell.history_manager.store_inputs(count, raw_cell)
                shell.execution_count = count + counted_at_start

    async def run(
        self,
        cell_id: str,
        source: str,
        *,
        send: Callable[[CellOutputsParams], bool] | None,
        timeout: float,
        run: RunContext | None = None,
    ) -> ToolOutput:
        """Run ``source`` as cell ``cell_id``; with ``send``, its outputs go to the page. Within
        ``run``, what the cell changes in the namespace is part of the run's checkpoint (an undo
        of the run puts the variables back, as it puts back the cell's outputs)."""
        sink = CellOutputs(cell_id, send) if send is not None else None
        job = _Job()
        call = None
        variables = self.variables
        if variables is not None and run is not None and run.run_id:
            run_id = run.run_id
            call = await self.main.run(lambda: variables.before(run_id, _transformed(self.shell, source)))
            if warning := call.warning():
                run.warn("undo_not_covered", warning)
        future = asyncio.ensure_future(self.main.run(lambda: self._execute(job, source, sink, call)))
        try:
            done, _ = await asyncio.wait({future}, timeout=timeout)
            if not done:
                job.interrupt("timeout")
                output: ToolOutput = await future
                return output
            return future.result()
        except asyncio.CancelledError:
            job.interrupt("stopped")  # Stop: the cell must not run on for nobody
            future.add_done_callback(_retrieve)  # how the cell ended is the run's end, said already
            raise

    def _execute(
        self, job: _Job, source: str, sink: CellOutputs | None, call: CallCheckpoint | None
    ) -> ToolOutput:
        try:
            return self._execute_checked(job, source, sink)
        finally:
            if call is not None and self.variables is not None:
                self.variables.after(call)

    def _execute_checked(self, job: _Job, source: str, sink: CellOutputs | None) -> ToolOutput:
        from .python import execute

        if not job.started(threading.get_ident()):
            return ToolOutput(text="Not run: the run was stopped first.", is_error=True)
        shell = self.shell
        count = self._next_count()
        transformed = _transformed(shell, source)
        with contextlib.suppress(Exception):  # a history database that fails must not stop the cell
            shell.history_manager.store_inputs(count, transformed, source)
        if sink is not None:
            sink.begin()
        try:
            output = execute(
                shell,
                source,
                sink=sink,
                filename=f"<cell-{count}>",
                execution_count=count,
                caller_interrupted=lambda: job.reason is not None,
            )
        except KeyboardInterrupt:  # the kernel's interrupt (■, Ctrl-C): the run ends with it
            if sink is not None:  # the cell says why it ended, as a cell the user stops does
                sink.error("KeyboardInterrupt", "", ["KeyboardInterrupt"])
            raise
        finally:
            job.ended()
            shell.execution_count = count + 1
            self._ran += 1
            if sink is not None:
                sink.end(count)
        if job.reason == "timeout":
            output = ToolOutput(
                text=f"{output.text}\n\n[interrupted: the cell ran past run_cell's timeout]".strip(),
                is_error=True,
                images=output.images,
            )
        return ToolOutput(
            text=f"(execution count {count})\n\n{output.text}",
            is_error=output.is_error,
            display=None if sink is not None else output.display,
            images=output.images,
        )


class _Job:
    """The main thread while it runs one cell: what an interrupt must reach, and only then."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._thread: int | None = None
        #: Why the caller interrupted the cell ("timeout", "stopped"), if it did.
        self.reason: str | None = None

    def started(self, thread: int) -> bool:
        """Whether the cell may start (the run was not stopped while it waited its turn)."""
        with self._lock:
            if self.reason is not None:
                return False
            self._thread = thread
            return True

    def ended(self) -> None:
        with self._lock:
            self._thread = None

    def interrupt(self, reason: str) -> None:
        with self._lock:
            self.reason = reason
            if self._thread is not None:
                _raise_keyboard_interrupt(self._thread)


def _raise_keyboard_interrupt(thread: int) -> None:
    """A ``KeyboardInterrupt`` in ``thread``: as a SIGINT where a Python handler turns it into one
    (a busy kernel's), which also ends a blocking sleep or read; otherwise raised asynchronously
    at the thread's next bytecode."""
    if thread == threading.main_thread().ident and callable(signal.getsignal(signal.SIGINT)):
        signal.pthread_kill(thread, signal.SIGINT)
        return
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread), ctypes.py_object(KeyboardInterrupt))


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


def _transformed(shell: Any, source: str) -> str:
    try:
        return str(shell.transform_cell(source))
    except Exception:  # a syntax error: the cell reports it when it runs
        return source
