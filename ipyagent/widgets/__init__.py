"""Live views of the agent for Jupyter front ends, built on anywidget.

- :class:`RunView` — one ``%%agent`` run (the kernel layer creates these);
- :class:`ChatWidget` — a conversation with an agent, typed into the notebook.

Their JavaScript and CSS are bundled into ``static/`` (built from ``js/`` in the repository), so
they work offline. The protocol between the two sides is in docs/widget-protocol.md. The views
load on first use: the reducer and transport do not need anywidget.
"""

from __future__ import annotations

import importlib as _importlib
import typing as _typing

if _typing.TYPE_CHECKING:
    from .chat import ChatWidget
    from .views import AgentView, RunView

__all__ = ["AgentView", "ChatWidget", "RunView"]

_WHERE = {"AgentView": ".views", "RunView": ".views", "ChatWidget": ".chat"}


def __getattr__(name: str) -> _typing.Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'ipyagent.widgets' has no attribute {name!r}")
    return getattr(_importlib.import_module(module, __name__), name)
