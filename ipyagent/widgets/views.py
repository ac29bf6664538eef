"""The anywidget views' kernel side: state in, the user's actions out.

:class:`AgentView` is what both views share; :class:`RunView` shows one ``%%agent`` run. A view
turns the events and inputs it is fed into state (with :class:`~.reducer.ViewReducer`), sends the
changes as batched patches, acknowledges the front end's hello, and hands every other message
from the front end, parsed into an :data:`~.view_state.Action`, to the handlers registered with
:meth:`AgentView.on_action`. It never runs or steers an agent: a controller
(:mod:`ipyagent.controllers`) does, on the actions it receives. The front end (built from
``js/src``) applies the patches and renders: each view's ``_esm`` is a small loader of the front
end's runtime, which a page loads once (see :mod:`.runtime`). The types of the protocol are in
:mod:`.view_state`.

Threads: events are fed on the thread that renders (the kernel's main thread for a ``%%agent``
cell, the worker loop for the chat), while the front end's messages may arrive on a comm subshell
thread; a lock keeps the reducer consistent, and action handlers must be thread-safe (the agent's
own methods, cancel and resolve, are).
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anywidget
import traitlets

from .reducer import ViewReducer
from .runtime import REQUESTS
from .transport import Throttle, write_quietly
from .view_state import AckMessage, Action, ViewState, parse_action

if TYPE_CHECKING:
    from ..agentlib.events import AgentEvent

__all__ = ["ActionHandler", "AgentView", "RunView"]

STATIC = Path(__file__).parent / "static"

#: Receives the user's actions in a view (on the thread the comm message arrived on).
ActionHandler = Callable[[Action], None]


class AgentView(anywidget.AnyWidget):
    """What both views share: the state trait, batched patches, hello/ack, and the user's actions
    handed to the handlers registered with :meth:`on_action`."""

    # No ``_css``: the stylesheet comes with the runtime, once per page.
    state = traitlets.Dict().tag(sync=True)
    view_kind = "view"

    def __init__(self, *, interval: float | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.lock = threading.RLock()
        self.reducer = ViewReducer()
        self.throttle = Throttle(self.reducer, self.send, interval=interval)
        #: Set once a front end showed this view (its hello arrived): a person can click.
        self.live = threading.Event()
        self._action_handlers: list[ActionHandler] = []
        self.state = _snapshot(self.reducer.state)
        #: The ``seq`` of the last whole state sent to the front ends (see :meth:`resync`).
        self.sent_seq = self.state["seq"]
        self.on_msg(self._on_frontend_message)
        _keep_subshell_routing(self)

    # -- events in -------------------------------------------------------------------------------

    def feed(self, event: AgentEvent) -> None:
        with self.lock:
            self.reducer.feed(event)

    def tick(self) -> None:
        with self.lock:
            self.throttle.tick()

    def flush(self) -> None:
        """Send what is pending now, whatever the interval (before the main thread goes busy)."""
        with self.lock:
            self.throttle.flush()

    def publish(self) -> None:
        """Send what is pending and write the complete state to the trait (what a reloaded page
        and nbclient's saved widget state get).

        Once a front end is live it has that state already, built from the patches (it asks for
        the whole state when it misses one, :meth:`resync`): the trait is then written without
        sending the run's text a second time."""
        with self.lock:
            self.throttle.flush()
            state = _snapshot(self.reducer.state)
            if self.live.is_set():
                write_quietly(self, "state", state)
            else:
                self.state = state
                self.sent_seq = state["seq"]

    def resync(self, seq: int) -> None:
        """A front end has folded in the patches up to ``seq``; send it the whole state if it is
        behind, unless a whole state sent since that point is on its way to it already."""
        with self.lock:
            if seq < self.sent_seq or seq >= self.reducer.state["seq"]:
                return  # what it lacks comes with the next patches, or with that whole state
            self.throttle.flush()
            state = _snapshot(self.reducer.state)
            if state == self.state:
                self.send_state("state")  # the trait was written quietly: same value, send it
            else:
                self.state = state
            self.sent_seq = state["seq"]

    # -- actions out -----------------------------------------------------------------------------

    def on_action(self, handler: ActionHandler, *, remove: bool = False) -> None:
        """Call ``handler`` with each action the user takes in this view (``remove=True`` stops).

        A hello is acknowledged by the view before its handlers see it."""
        if remove:
            if handler in self._action_handlers:  # as ipywidgets' on_msg: removing twice is fine
                self._action_handlers.remove(handler)
        else:
            self._action_handlers.append(handler)

    def _on_frontend_message(self, _widget: Any, content: Any, buffers: Any) -> None:
        action = parse_action(content, buffers or ())
        if action is None:
            return
        if action["action"] == "hello":
            first = not self.live.is_set()
            self.live.set()
            ack: AckMessage = {"kind": "ack", "of": "hello"}
            self.send(ack)
            if first:  # (a page that missed patches asks for the whole state itself: "sync")
                with self.lock:
                    self.reducer.set_live(True)
                    self.publish()
        elif action["action"] == "sync":
            self.resync(action["seq"])
            return
        elif action["action"] == "runtime":
            REQUESTS.answer(self, action)
            return
        for handler in list(self._action_handlers):
            handler(action)

    def __repr__(self) -> str:
        # The text/plain of the widget's output. Constant on purpose: a live view's output is
        # updated in place, and nbval compares the first version of an output with the saved,
        # last one. The run's text goes to a separate output when no front end is watching.
        return f"ipyagent {self.view_kind}"


class RunView(AgentView):
    """The live view of one ``%%agent`` run."""

    _esm = STATIC / "run_view.js"
    view_kind = "run"


def _snapshot(state: ViewState) -> dict[str, Any]:
    """A copy for the trait: the reducer goes on changing its own, and traitlets sends a value
    only when it differs from the last one written."""
    return copy.deepcopy(dict(state))


def _keep_subshell_routing(widget: Any) -> None:
    """Let button clicks reach the kernel while a cell blocks (ipykernel 7 with comm subshells).

    ipykernel 7 routes a comm's incoming messages to the subshell that last *sent* on it — the
    main shell, busy running the ``%%agent`` cell — so a click would wait for the cell to end.
    Keeping the front end's own choice of subshell lets it through at once. Handlers then run off
    the main thread, which the views are written for. (ipykernel 6 has no subshells: there the
    runner pumps comm messages while it waits.)
    """
    comm = getattr(widget, "comm", None)
    if comm is not None and hasattr(comm, "_reply_subshell_for"):
        comm._reply_subshell_for = lambda _data, default: default
