"""The chat's view: a conversation's blocks, an input box, Send, Stop, a model picker and "New
conversation" — state in, the user's actions out.

The view never runs an agent. :class:`ipyagent.controllers.ChatController` does: it feeds the
view the agent's events and the user's messages, and acts on what the view hands it (``send``,
``retry``, ``new``, ``model``, and the buttons every view has). Most code wants
:class:`ipyagent.widgets.ChatWidget`, this view with its controller::

    from ipyagent.widgets import ChatWidget
    ChatWidget(agent)            # or `%agent chat` in a kernel with the extension loaded
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import traitlets

from .views import STATIC, AgentView

if TYPE_CHECKING:
    from ..agentlib.messages import Message

__all__ = ["ChatView"]


class ChatView(AgentView):
    """A chat's view: its blocks, the conversation it opened on, and the models to pick from."""

    _esm = STATIC / "chat.js"
    view_kind = "chat"
    models = traitlets.List(traitlets.Unicode()).tag(sync=True)
    #: The conversation the chat opened on, as finished blocks shown before ``state``'s. Written
    #: once (and emptied by "New conversation"), so a run never sends the history again.
    history = traitlets.List(traitlets.Dict()).tag(sync=True)

    def __init__(self, *, models: Sequence[str] = (), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.models = list(models)

    def show_history(self, messages: list[Message]) -> None:
        """Show ``messages`` (a resumed conversation) as the chat's history."""
        with self.lock:
            self.reducer.show_history(messages)
            self.history = [dict(block) for block in self.reducer.history]
        self.publish()

    def add_user(self, text: str) -> None:
        with self.lock:
            self.reducer.add_user(text)

    def add_error(self, code: str, message: str, hint: str = "", retryable: bool = False) -> None:
        """An error the agent's events do not carry (a run that could not start, a bad model)."""
        with self.lock:
            self.reducer.add_error(code, message, hint, retryable)
        self.publish()

    def set_model(self, model: str) -> None:
        with self.lock:
            self.reducer.set_model(model)
        self.publish()

    def clear(self) -> None:
        """A new conversation: every block goes, the history too."""
        with self.lock:
            self.reducer.clear()
            self.history = []
        self.publish()
