"""Showing a ``%%agent`` run as a live widget, and letting its buttons through while the cell
blocks.

ipykernel 7 routes the widget's messages to a comm subshell (see
``ipyagent.widgets.views._keep_subshell_routing``); ipykernel 6 has no subshells, so the waiting
main thread pumps the kernel's queued messages itself, with ``jupyter_ui_poll``.

When the cell's request says that no front end shows it (:func:`~.front_end.no_front_end`), the
run's end writes the text outputs at once instead of waiting for a hello that will not come, and
a question is denied at once instead of after :data:`~ipyagent.controllers.HELLO_GRACE`. The
view only renders; a :class:`~ipyagent.controllers.ViewController` routes its buttons to the agent.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..agentlib.agent import Agent
    from ..agentlib.events import AgentEvent
    from ..agentlib.result import RunResult
    from ..controllers import ViewController
    from ..widgets.views import RunView

__all__ = ["WidgetRenderer", "pump_comm_messages", "widgets_available"]


def widgets_available() -> bool:
    """anywidget is installed and the front end is bundled (checked without importing either)."""
    from importlib.util import find_spec
    from pathlib import Path

    static = Path(__file__).parent.parent / "widgets" / "static"
    return find_spec("anywidget") is not None and (static / "run_view.js").is_file()


#: Seconds after showing the view that the run's end waits for its front end to say hello, when
#: nothing said whether there is one.
HELLO_WAIT = 1.0

log = logging.getLogger("ipyagent")


class WidgetRenderer:
    """The live view; plus, when no front end showed it (nbclient, nbval, nbconvert), the run's
    text and what its tools displayed as ordinary outputs at the end, for nbval to compare and
    static viewers to show."""

    def __init__(
        self,
        agent: Agent,
        *,
        interval: float | None = None,
        poll: Callable[[], None] | None = None,
        no_front_end: str | None = None,
    ) -> None:
        """``no_front_end`` says why nobody shows this cell, when that is known before the run."""
        from IPython.display import display

        from ..controllers import HELLO_GRACE, ViewController
        from ..widgets.views import RunView

        self.no_front_end = no_front_end
        if no_front_end is not None:
            log.debug("No front end shows this cell (%s): not waiting for the view's hello.", no_front_end)
        grace = 0.0 if no_front_end is not None else HELLO_GRACE
        self.view: RunView = RunView(interval=interval)
        self.controller: ViewController = ViewController(self.view, agent, hello_grace=grace)
        self._poll = poll
        self._shown_at = time.monotonic()
        display(self.view)  # type: ignore[no-untyped-call]

    def handle(self, event: AgentEvent) -> None:
        self.view.feed(event)

    def tick(self) -> None:
        self.view.tick()

    def flush(self) -> None:
        self.view.flush()

    def finish(self, result: RunResult | None) -> None:
        self.controller.close()
        self.view.publish()
        if not self._front_end_seen():
            from IPython.display import display

            from ..widgets.text import block_markdown, block_plain
            from .render import Output, displayed, is_output

            every = self.view.reducer.state["blocks"]
            blocks = [b for b in every if is_output(b)]
            plain = "\n".join(filter(None, (block_plain(b, every) for b in blocks)))
            markdown = "\n\n".join(filter(None, (block_markdown(b, every) for b in blocks)))
            display(Output(plain, markdown))  # type: ignore[no-untyped-call]
            # What the tools showed the user (figures, tables) lives in the view's state, which
            # such a notebook does not keep.
            for block in blocks:
                for bundle in displayed(block, every):
                    display(bundle, raw=True)  # type: ignore[no-untyped-call]

    def _front_end_seen(self) -> bool:
        if self.no_front_end is not None:
            # Nobody renders the view now; one rendered later (a saved notebook's widget state)
            # shows the state published by finish(), beside these outputs.
            return self.view.live.is_set()
        # A short run may end before the front end rendered the view: give it a moment.
        if not self.view.live.is_set():
            log.debug("Waiting up to %.1f s for a front end to show the view.", HELLO_WAIT)
        deadline = self._shown_at + HELLO_WAIT
        while not self.view.live.is_set() and time.monotonic() < deadline:
            if self._poll is not None:
                self._poll()
            self.view.live.wait(0.02)
        return self.view.live.is_set()


@contextlib.contextmanager
def pump_comm_messages(shell: object) -> Iterator[Callable[[], None] | None]:
    """On ipykernel 6, a function that processes the kernel's pending messages (widget clicks)
    while the main thread waits; ``None`` where that is not needed or not possible (ipykernel 7,
    or no kernel at all: terminal IPython)."""
    from importlib.metadata import PackageNotFoundError, version

    if getattr(shell, "kernel", None) is None:
        yield None
        return
    try:
        major = int(version("ipykernel").split(".")[0])
    except (PackageNotFoundError, ValueError):
        major = 7
    if major >= 7:
        yield None
        return
    try:
        from jupyter_ui_poll import ui_events  # type: ignore[import-untyped]
    except ImportError:
        yield None
        return
    with ui_events() as poll:

        def pump() -> None:
            poll(10)

        yield pump
