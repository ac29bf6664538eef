"""Showing a ``%%agent`` run as a live widget, and letting its buttons through while the cell
blocks.

ipykernel 7 routes the widget's messages to a comm subshell (see
``ipyagent.widgets.views._keep_subshell_routing``); ipykernel 6 has no subshells, so the waiting
main thread pumps the kernel's queued messages itself, with ``jupyter_ui_poll``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..agentlib.agent import Agent
    from ..agentlib.events import AgentEvent
    from ..agentlib.result import RunResult
    from ..widgets.views import RunView

__all__ = ["WidgetRenderer", "pump_comm_messages", "widgets_available"]


def widgets_available() -> bool:
    """anywidget is installed and the front end is bundled (checked without importing either)."""
    from importlib.util import find_spec
    from pathlib import Path

    static = Path(__file__).parent.parent / "widgets" / "static"
    return find_spec("anywidget") is not None and (static / "run_view.js").is_file()


class WidgetRenderer:
    def __init__(self, agent: Agent) -> None:
        from IPython.display import display

        from ..widgets.views import RunView

        self.view: RunView = RunView(agent)
        self._handles = self.view.watch(agent)
        self._display = display(self.view, display_id=True)  # type: ignore[no-untyped-call]

    def handle(self, event: AgentEvent) -> None:
        self.view.feed(event)

    def tick(self) -> None:
        self.view.tick()

    def finish(self, result: RunResult | None) -> None:
        for handle in self._handles:
            handle.remove()
        self.view.finish(result)
        if self._display is not None:
            # Re-display in place: the saved output's text/plain becomes the finished run's.
            self._display.update(self.view)


@contextlib.contextmanager
def pump_comm_messages() -> Iterator[Callable[[], None] | None]:
    """On ipykernel 6, a function that processes the kernel's pending messages (widget clicks)
    while the main thread waits; ``None`` where that is not needed or not possible."""
    from importlib.metadata import PackageNotFoundError, version

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
