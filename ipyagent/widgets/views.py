"""The anywidget views' kernel side: state, batched patches, and the buttons' messages.

:class:`AgentView` is what both views share; :class:`RunView` shows one ``%%agent`` run. The
front end (built from ``js/src``) applies the patches and renders: each view's ``_esm`` is a
small loader of the front end's runtime, which a page loads once (see :mod:`.runtime`). The
protocol is in docs/widget-protocol.md.

Threads: events are fed on the thread that renders (the kernel's main thread for a ``%%agent``
cell, the worker loop for the chat), while the front end's messages may arrive on a comm subshell
thread; a lock keeps the reducer consistent, and the agent's own methods (cancel, resolve) are
thread-safe.
"""

from __future__ import annotations

import copy
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anywidget
import traitlets

from .reducer import ViewReducer
from .runtime import REQUESTS
from .transport import DEFAULT_INTERVAL, Throttle, write_quietly

if TYPE_CHECKING:
    from ..agentlib.agent import Agent
    from ..agentlib.events import AgentEvent, AskUserRequired, PermissionRequired
    from ..agentlib.result import RunResult

__all__ = ["AgentView", "RunView"]

STATIC = Path(__file__).parent / "static"

#: Seconds to wait for a front end to announce itself before a question is denied as unanswerable.
HELLO_GRACE = 2.0


class AgentView(anywidget.AnyWidget):
    """What both views share: the state trait, patches, hello/ack and the agent's buttons."""

    # No ``_css``: the stylesheet comes with the runtime, once per page.
    state = traitlets.Dict().tag(sync=True)
    view_kind = "view"

    def __init__(
        self,
        agent: Agent | None = None,
        *,
        interval: float = DEFAULT_INTERVAL,
        hello_grace: float = HELLO_GRACE,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.agent = agent
        self.hello_grace = hello_grace
        self.lock = threading.RLock()
        self.reducer = ViewReducer()
        self.throttle = Throttle(self.reducer, self.send, interval=interval)
        self.live = threading.Event()
        self.state = copy.deepcopy(self.reducer.state)
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

    def publish(self) -> None:
        """Send what is pending and write the complete state to the trait (what a reloaded page
        and nbclient's saved widget state get).

        Once a front end is live it has that state already, built from the patches (it asks for
        the whole state when it misses one, :meth:`resync`): the trait is then written without
        sending the run's text a second time."""
        with self.lock:
            self.throttle.flush()
            state = copy.deepcopy(self.reducer.state)
            if self.live.is_set():
                write_quietly(self, "state", state)
            else:
                self.state = state
                self.sent_seq = state["seq"]

    def resync(self, seq: Any) -> None:
        """A front end has folded in the patches up to ``seq``; send it the whole state if it is
        behind, unless a whole state sent since that point is on its way to it already."""
        with self.lock:
            if not isinstance(seq, int) or seq < self.sent_seq or seq >= self.reducer.state["seq"]:
                return  # what it lacks comes with the next patches, or with that whole state
            self.throttle.flush()
            state = copy.deepcopy(self.reducer.state)
            if state == self.state:
                self.send_state("state")  # the trait was written quietly: same value, send it
            else:
                self.state = state
            self.sent_seq = state["seq"]

    # -- the agent's questions -------------------------------------------------------------------

    def watch(self, agent: Agent) -> list[Any]:
        """Answer the agent's questions through this view for one run; returns the handles to
        remove afterwards. Without a live front end a question is denied after ``hello_grace``
        seconds (:data:`HELLO_GRACE`; none when the cell is known to run with no front end)."""
        self.agent = agent
        return [
            agent.on("permission_required", self._on_permission),
            agent.on("ask_user_required", self._on_question),
        ]

    def _on_permission(self, event: PermissionRequired) -> None:
        self._unless_live(lambda: self._deny(event.call_id))

    def _on_question(self, event: AskUserRequired) -> None:
        self._unless_live(lambda: self.agent.answer(event.question_id, None) if self.agent else None)

    def _unless_live(self, fallback: Any) -> None:
        if self.live.is_set():
            return

        def later() -> None:
            if not self.live.wait(self.hello_grace):
                fallback()

        threading.Thread(target=later, name="ipyagent-hello-wait", daemon=True).start()

    def _deny(self, call_id: str) -> None:
        if self.agent is not None:
            self.agent.resolve_permission(
                call_id,
                "deny",
                reason="no one could answer: the notebook's front end did not show the widget",
            )

    # -- front end in ----------------------------------------------------------------------------

    def _on_frontend_message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if not isinstance(content, dict):
            return
        action = content.get("action")
        agent = self.agent
        if action == "hello":
            first = not self.live.is_set()
            self.live.set()
            self.send({"kind": "ack", "of": "hello"})
            if first:  # (a page that missed patches asks for the whole state itself: "sync")
                with self.lock:
                    self.reducer.set_live(True)
                    self.publish()
        elif action == "sync":
            self.resync(content.get("seq"))
        elif action == "runtime":
            REQUESTS.answer(self, content)
        elif action == "stop" and agent is not None:
            agent.cancel()
        elif action == "permission" and agent is not None:
            decision = content.get("decision")
            if decision in ("allow", "always", "deny"):
                agent.resolve_permission(str(content.get("id")), decision)
        elif action == "answer" and agent is not None:
            answer = content.get("answer")
            agent.answer(str(content.get("id")), None if answer is None else str(answer))
        else:
            self.handle_action(action, content)

    def handle_action(self, action: Any, content: dict[str, Any]) -> None:
        """Actions a subclass adds (the chat's send/new/model/retry)."""

    def __repr__(self) -> str:
        # The text/plain of the widget's output. Constant on purpose: a live view's output is
        # updated in place, and nbval compares the first version of an output with the saved,
        # last one. The run's text goes to a separate output when no front end is watching.
        return f"ipyagent {self.view_kind}"


class RunView(AgentView):
    """The live view of one ``%%agent`` run."""

    _esm = STATIC / "run_view.js"
    view_kind = "run"

    def finish(self, result: RunResult | None) -> None:
        self.publish()


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
