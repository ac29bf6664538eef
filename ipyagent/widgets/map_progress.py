"""A progress bar for ``agent.map`` in a notebook.

    from ipyagent.widgets import MapProgressBar

    labels = await agent.map(df, "Classify: {title}", output_type=Label, progress=MapProgressBar())

:class:`MapProgressBar` is a ``progress=`` callable: it is given each
:class:`~ipyagent.agentlib.events.MapProgress` event and shows a bar (items finished of the
total) beside the map's line of text (done, failed, tokens, cost, time left), displayed in the
cell on the first event and updated in place. The bar turns green when the map completes,
orange when a budget stops it, red when items failed or it was cancelled. It reads the events
and nothing else of the core; ipywidgets is imported when it first shows.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from ..agentlib.events import MapProgress

__all__ = ["MapProgressBar"]


class MapProgressBar:
    """Show a map's progress as a bar in the cell (pass it as ``agent.map(..., progress=...)``).

    Args:
        display: How the bar is shown (default: IPython's ``display``).
    """

    def __init__(self, *, display: Callable[[Any], Any] | None = None) -> None:
        self._display = display
        self.bar: Any = None
        self.label: Any = None
        self.box: Any = None

    def __call__(self, event: MapProgress) -> None:
        if self.box is None:
            self._show(event.total)
        self.bar.max = max(event.total, 1)
        self.bar.value = event.done + event.failed
        self.label.value = str(event)
        if event.finished:
            self.bar.bar_style = _style(event)

    def _show(self, total: int) -> None:
        ipywidgets: Any = importlib.import_module("ipywidgets")  # untyped; loaded only when shown
        self.bar = ipywidgets.IntProgress(value=0, min=0, max=max(total, 1))
        self.label = ipywidgets.Label(value="")
        self.box = ipywidgets.HBox([self.bar, self.label])
        if self._display is None:
            from IPython.display import display

            self._display = display
        self._display(self.box)

    def __repr__(self) -> str:
        return f"MapProgressBar({self.label.value!r})" if self.label is not None else "MapProgressBar()"


def _style(event: MapProgress) -> str:
    if event.status == "cancelled" or event.failed:
        return "danger"
    return "warning" if event.status == "exhausted" else "success"
