"""Live views of the agent for Jupyter front ends, built on anywidget.

- :class:`RunView` — one ``%%agent`` run (the kernel layer creates these);
- :class:`ChatView` — a conversation: its blocks, an input box, the buttons;
- :class:`ChatWidget` — the chat view with the controller that runs its agent. It lives in
  :mod:`ipyagent.controllers`, since a view never runs an agent; it is importable from here,
  where users have always found it;
- :class:`MapProgressBar` — a bar for ``agent.map(..., progress=MapProgressBar())``.

A view is state in, the user's actions out: the core's events go in, a controller receives the
actions (:mod:`ipyagent.controllers`). The view model — blocks, patches, actions — is typed in
:mod:`.view_state`, the source of truth for the protocol (docs/widget-protocol.md).

Their JavaScript and CSS are bundled into ``static/`` (built from ``js/`` in the repository), so
they work offline. The views load on first use: the reducer and transport do not need anywidget.
"""

from __future__ import annotations

import importlib as _importlib
import typing as _typing

if _typing.TYPE_CHECKING:
    from ..controllers import ChatWidget
    from .chat import ChatView
    from .map_progress import MapProgressBar
    from .views import AgentView, RunView

__all__ = ["AgentView", "ChatView", "ChatWidget", "MapProgressBar", "RunView"]

#: Where each name lives. ChatWidget is the one name from outside the package: a re-export for
#: users, which no view module uses (tests/test_package.py checks both).
_WHERE = {
    "AgentView": ".views",
    "RunView": ".views",
    "ChatView": ".chat",
    "MapProgressBar": ".map_progress",
    "ChatWidget": "ipyagent.controllers",
}


def __getattr__(name: str) -> _typing.Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'ipyagent.widgets' has no attribute {name!r}")
    return getattr(_importlib.import_module(module, __name__), name)
