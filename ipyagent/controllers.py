"""Run control for the views: what an agent does when the user clicks.

A view (:mod:`ipyagent.widgets`) renders state and hands out the user's actions; it never runs
or steers an agent. The controllers here do, between the core and the views:

- :class:`ViewController` binds one view to one agent: Stop, the permission buttons and the
  answers to the agent's questions reach the agent, and a question that nobody can answer (no
  front end showed the view) is denied or declined instead of waiting for ever. The kernel's
  ``%%agent`` cells use one per run view (``ipyagent/kernel/widget_renderer.py``).
- :class:`ChatController` runs a chat: a message starts a run (or joins the one in flight),
  Retry sends the last one again, "New conversation" starts over, the model picker switches.
- :class:`ChatWidget` is the chat's view with its controller: the public widget
  (``from ipyagent.widgets import ChatWidget``; ``%agent chat`` returns one).

Threads: actions arrive on the thread of the comm message (a comm subshell on ipykernel 7),
events on the agent's loop; the agent's own methods (cancel, resolve_permission, answer, send)
are thread-safe, and a chat's runs go to the core's background loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from typing_extensions import assert_never

from .agentlib.agent import Agent
from .agentlib.attachments import file_block
from .agentlib.errors import AgentError
from .widgets.chat import ChatView
from .widgets.view_state import Action, ModelAction, NewAction, PickedFile, RetryAction, SendAction
from .widgets.views import AgentView

if TYPE_CHECKING:
    import concurrent.futures

    from .agentlib.attachments import Attachment
    from .agentlib.background import BackgroundLoop
    from .agentlib.bus import Subscription
    from .agentlib.events import AskUserRequired, PermissionRequired
    from .agentlib.result import RunResult

__all__ = ["HELLO_GRACE", "ChatController", "ChatWidget", "ViewController"]

#: Seconds to wait for a front end to announce itself before a question is denied as unanswerable.
HELLO_GRACE = 2.0

ChatAction = RetryAction | SendAction | NewAction | ModelAction


class ViewController:
    """Routes the user's actions in ``view`` to ``agent``, until :meth:`close`.

    Without a live front end (no hello yet), the agent's questions are denied (a permission) or
    declined (a question) after ``hello_grace`` seconds; pass 0 when the cell is known to run
    with no front end."""

    def __init__(self, view: AgentView, agent: Agent, *, hello_grace: float = HELLO_GRACE) -> None:
        self.view = view
        self.agent = agent
        self.hello_grace = hello_grace
        view.on_action(self.handle)
        self._subscriptions: list[Subscription] = [
            agent.on("permission_required", self._on_permission),
            agent.on("ask_user_required", self._on_question),
        ]

    def handle(self, action: Action) -> None:
        """Act on one of the user's actions."""
        if action["action"] == "hello":
            pass  # the view acknowledged it; ``view.live`` says a person can click
        elif action["action"] == "sync" or action["action"] == "runtime":
            pass  # the view's own business (its state, its front end's code): never handed on
        elif action["action"] == "stop":
            self.agent.cancel()
        elif action["action"] == "permission":
            self.agent.resolve_permission(action["id"], action["decision"])
        elif action["action"] == "answer":
            self.agent.answer(action["id"], action["answer"])
        elif (
            action["action"] == "retry"
            or action["action"] == "send"
            or action["action"] == "new"
            or action["action"] == "model"
        ):
            self.handle_chat(action)
        else:
            assert_never(action)

    def handle_chat(self, action: ChatAction) -> None:
        """The chat's own actions. A run view has no input box, and its Retry is the cell's."""

    def close(self) -> None:
        """Stop listening to the agent and to the view."""
        for subscription in self._subscriptions:
            subscription.remove()
        self._subscriptions = []
        self.view.on_action(self.handle, remove=True)

    # -- the agent's questions, when nobody may be there to answer -------------------------------

    def _on_permission(self, event: PermissionRequired) -> None:
        self._unless_live(
            lambda: self.agent.resolve_permission(
                event.call_id,
                "deny",
                reason="no one could answer: the notebook's front end did not show the widget",
            )
        )

    def _on_question(self, event: AskUserRequired) -> None:
        self._unless_live(lambda: self.agent.answer(event.question_id, None))

    def _unless_live(self, fallback: Callable[[], object]) -> None:
        live = self.view.live
        if live.is_set():
            return

        def later() -> None:
            if not live.wait(self.hello_grace):
                fallback()

        threading.Thread(target=later, name="ipyagent-hello-wait", daemon=True).start()


class ChatController(ViewController):
    """Runs ``agent`` for the chat ``view``: on the core's background loop (``loop``), since
    the kernel is idle while a person types, with the view's patches flushed from there on a
    timer."""

    def __init__(
        self,
        agent: Agent,
        view: ChatView,
        *,
        loop: BackgroundLoop | None = None,
        wait_for: Callable[[concurrent.futures.Future[Any], float | None], Any] | None = None,
        hello_grace: float = HELLO_GRACE,
        mentions: Callable[[str], Sequence[Attachment]] | None = None,
    ) -> None:
        from .agentlib.background import shared_loop

        super().__init__(view, agent, hello_grace=hello_grace)
        #: What a message's ``@name`` mentions attach (the kernel's: variables' summaries).
        self.mentions = mentions
        self.chat = view
        self._loop = loop or shared_loop()
        # How to block for a run: in a kernel, while serving the jobs its tools send to the main
        # thread (which a plain ``future.result()`` would deadlock).
        self._wait_for = wait_for
        self._last_prompt: str | None = None
        #: The run in flight, or the last one.
        self.future: concurrent.futures.Future[RunResult | None] | None = None
        self._subscriptions.append(agent.on("*", view.feed))
        view.show_history(agent.messages)

    def handle_chat(self, action: ChatAction) -> None:
        if action["action"] == "send":
            if action["text"].strip():
                self.submit(action["text"].strip(), files=action["files"])
        elif action["action"] == "retry":
            if self._last_prompt:
                self.submit(self._last_prompt)
        elif action["action"] == "new":
            self.new_conversation()
        elif action["action"] == "model":
            if action["model"]:
                self.choose_model(action["model"])
        else:
            assert_never(action)

    def submit(self, text: str, *, files: Sequence[PickedFile] = ()) -> None:
        """Send ``text`` with the ``files`` picked in the chat: starts a run, or joins the one in
        flight (as ``agent.send``; files then wait for the next message, which says so)."""
        self.chat.add_user(text)
        if self.agent.running:
            if files:
                names = ", ".join(f["name"] for f in files)
                self.chat.add_error(
                    "invalid_attachment",
                    f"Not attached: {names}. Files go with a new message, not one sent while the "
                    "agent is working.",
                    "Attach them again to your next message, once this run ends.",
                )
            self.agent.send(text)
            return
        self._last_prompt = text
        self.future = self._loop.submit(self._run(text, files))

    def wait(self, timeout: float | None = None) -> RunResult | None:
        """Block until the run in flight ends, and return its result (None if it could not start).

        Raises ``TimeoutError`` when ``timeout`` seconds pass first; the run goes on. An interrupt
        (Ctrl-C / ■) stops the run."""
        future = self.future
        if future is None:
            return None
        try:
            if self._wait_for is not None:
                result: RunResult | None = self._wait_for(future, timeout)
                return result
            return future.result(timeout)
        except KeyboardInterrupt:
            self.agent.cancel()
            raise

    async def _run(self, text: str, files: Sequence[PickedFile] = ()) -> RunResult | None:
        ticker = asyncio.ensure_future(self._flush_periodically())
        try:
            attachments = [
                *(self.mentions(text) if self.mentions is not None else ()),
                *(file_block(f["name"], f["data"]) for f in files),
            ]
            return await self.agent.run(text, attachments=attachments)
        except AgentError as exc:  # misconfiguration (no model, no key): shown in the chat
            info = exc.info
            self.chat.add_error(info.code, info.message, info.hint, info.retryable)
            return None
        finally:
            ticker.cancel()
            self.chat.publish()

    async def _flush_periodically(self) -> None:
        while True:
            await asyncio.sleep(self.chat.throttle.interval or 0.05)
            self.chat.tick()

    def new_conversation(self) -> None:
        if self.agent.running:
            self.agent.cancel()
        self.agent.reset()
        self.chat.clear()

    def choose_model(self, model: str) -> None:
        try:
            self.agent.model = model
            self.agent.provider  # noqa: B018 - resolve now, so a bad choice is reported at once
        except AgentError as exc:
            self.chat.add_error(exc.info.code, exc.info.message, exc.info.hint)
        else:
            self.chat.set_model(model)


class ChatWidget(ChatView):
    """A chat with ``agent`` (a new :class:`~ipyagent.Agent` if none): input box, Send, Stop, a
    model picker and "New conversation".

    Runs start from the Send button while the kernel is idle, so they run on the core's
    background loop. From code, ``chat.submit(text)`` starts one the same way and
    ``chat.wait()`` blocks until it ends. The view is a :class:`~ipyagent.widgets.chat.ChatView`;
    what it does is its :class:`ChatController`'s (``chat.controller``)."""

    def __init__(
        self,
        agent: Agent | None = None,
        *,
        models: list[str] | None = None,
        loop: BackgroundLoop | None = None,
        wait_for: Callable[[concurrent.futures.Future[Any], float | None], Any] | None = None,
        interval: float | None = None,
        hello_grace: float = HELLO_GRACE,
        mentions: Callable[[str], Sequence[Attachment]] | None = None,
        **kwargs: Any,
    ) -> None:
        agent = agent if agent is not None else Agent()
        super().__init__(models=models or suggested_models(agent), interval=interval, **kwargs)
        self.controller = ChatController(
            agent, self, loop=loop, wait_for=wait_for, hello_grace=hello_grace, mentions=mentions
        )

    @property
    def agent(self) -> Agent:
        return self.controller.agent

    @property
    def future(self) -> concurrent.futures.Future[RunResult | None] | None:
        return self.controller.future

    def submit(self, text: str) -> None:
        """Send ``text``: starts a run, or joins the one in flight (as ``agent.send``)."""
        self.controller.submit(text)

    def wait(self, timeout: float | None = None) -> RunResult | None:
        """Block until the run in flight ends, and return its result (None if it could not start).

        Raises ``TimeoutError`` when ``timeout`` seconds pass first; the run goes on. An interrupt
        (Ctrl-C / ■) stops the run."""
        return self.controller.wait(timeout)

    def new_conversation(self) -> None:
        """Start over: stop the run in flight, forget the conversation, clear the view."""
        self.controller.new_conversation()

    def choose_model(self, model: str) -> None:
        self.controller.choose_model(model)

    def close(self) -> None:
        # The widget's constructor may fail before the controller exists; close() still runs
        # from the widget's finalizer then.
        controller = self.__dict__.get("controller")
        if controller is not None:
            controller.close()
        super().close()


def suggested_models(agent: Agent) -> list[str]:
    """The picker's list: the agent's model first, then a default model for each key the user
    may have, and the local default."""
    from .agentlib.endpoints import DEFAULT_BY_KEY

    current = agent.model if isinstance(agent.model, str) else None
    known = [*dict.fromkeys(model for _env, model in DEFAULT_BY_KEY), "local/default"]
    return ([current] if current else []) + [m for m in known if m != current]
