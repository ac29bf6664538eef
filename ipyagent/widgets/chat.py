"""The chat widget: a conversation with an agent, typed into the notebook.

    from ipyagent.widgets import ChatWidget
    ChatWidget(agent)            # or `%agent chat` in a kernel with the extension loaded

Runs start from the widget's Send button while the kernel is idle, so they run on the core's
background loop, and the view's patches are flushed from there on a timer. From code,
``chat.submit(text)`` starts one the same way and ``chat.wait()`` blocks until it ends.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import traitlets

from .views import STATIC, AgentView

if TYPE_CHECKING:
    import concurrent.futures
    from collections.abc import Callable

    from ..agentlib.agent import Agent
    from ..agentlib.background import BackgroundLoop
    from ..agentlib.result import RunResult

__all__ = ["ChatWidget"]


class ChatWidget(AgentView):
    """A chat with ``agent``: input box, Send, Stop, a model picker and "New conversation"."""

    _esm = STATIC / "chat.js"
    view_kind = "chat"
    models = traitlets.List(traitlets.Unicode()).tag(sync=True)
    #: The conversation the chat opened on, as finished blocks shown before ``state``'s. Written
    #: once (and emptied by "New conversation"), so a run never sends the history again.
    history = traitlets.List(traitlets.Dict()).tag(sync=True)

    def __init__(
        self,
        agent: Agent | None = None,
        *,
        models: list[str] | None = None,
        loop: BackgroundLoop | None = None,
        wait_for: Callable[[concurrent.futures.Future[Any], float | None], Any] | None = None,
        **kwargs: Any,
    ) -> None:
        from ..agentlib.agent import Agent
        from ..agentlib.background import shared_loop

        agent = agent if agent is not None else Agent()
        super().__init__(agent, **kwargs)
        self.agent: Agent = agent
        self.models = models or _suggested_models(agent)
        self._loop = loop or shared_loop()
        self._last_prompt: str | None = None
        # How to block for a run: in a kernel, while serving the jobs its tools send to the main
        # thread (which a plain ``future.result()`` would deadlock).
        self._wait_for = wait_for
        self.future: concurrent.futures.Future[RunResult | None] | None = None
        self._handles = [*self.watch(agent), agent.on("*", self.feed)]
        with self.lock:
            self.reducer.show_history(agent.messages)
            self.history = [dict(block) for block in self.reducer.history]
        self.publish()

    def handle_action(self, action: Any, content: dict[str, Any]) -> None:
        if action == "send" and str(content.get("text", "")).strip():
            self.submit(str(content["text"]).strip())
        elif action == "retry" and self._last_prompt:
            self.submit(self._last_prompt)
        elif action == "new":
            self.new_conversation()
        elif action == "model" and content.get("model"):
            self.choose_model(str(content["model"]))

    def submit(self, text: str) -> None:
        """Send ``text``: starts a run, or joins the one in flight (as ``agent.send``)."""
        with self.lock:
            self.reducer.add_user(text)
        if self.agent.running:
            self.agent.send(text)
            return
        self._last_prompt = text
        self.future = self._loop.submit(self._run(text))

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

    async def _run(self, text: str) -> RunResult | None:
        from ..agentlib.errors import AgentError

        ticker = asyncio.ensure_future(self._flush_periodically())
        try:
            return await self.agent.run(text)
        except AgentError as exc:  # misconfiguration (no model, no key): shown in the chat
            with self.lock:
                info = exc.info
                self.reducer.add_error(info.code, info.message, info.hint, info.retryable)
            return None
        finally:
            ticker.cancel()
            self.publish()

    async def _flush_periodically(self) -> None:
        while True:
            await asyncio.sleep(self.throttle.interval or 0.05)
            self.tick()

    def new_conversation(self) -> None:
        if self.agent.running:
            self.agent.cancel()
        self.agent.reset()
        with self.lock:
            self.reducer.clear()
            self.history = []
        self.publish()

    def choose_model(self, model: str) -> None:
        from ..agentlib.errors import AgentError

        try:
            self.agent.model = model
            self.agent.provider  # noqa: B018 - resolve now, so a bad choice is reported at once
        except AgentError as exc:
            with self.lock:
                self.reducer.add_error(exc.info.code, exc.info.message, exc.info.hint)
        else:
            with self.lock:
                self.reducer.set_model(model)
        self.publish()

    def close(self) -> None:
        for handle in self._handles:
            handle.remove()
        super().close()


def _suggested_models(agent: Agent) -> list[str]:
    from ..agentlib.endpoints import DEFAULT_BY_KEY

    current = agent.model if isinstance(agent.model, str) else None
    known = [model for _env, model in DEFAULT_BY_KEY] + ["local/default"]
    return ([current] if current else []) + [m for m in known if m != current]
