"""The :class:`Agent`: a model, tools, a transcript, and the runs between them.

    from ipyagent import Agent, tool

    @tool(read_only=True)
    def get_weather(city: str) -> str:
        "Current weather in a city."
        return "sunny"

    agent = Agent(model="openai/gpt-4.1", tools=[get_weather])
    result = await agent.run("Weather in Paris?")

The agent keeps the conversation across runs (``agent.messages``) and cumulative usage. One run
at a time: while a run is in flight, :meth:`Agent.send` queues more input for it, and
:meth:`Agent.cancel`, :meth:`Agent.resolve_permission` and :meth:`Agent.answer` may be called
from any thread.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from pydantic import BaseModel

from .asks import PendingAnswers
from .bus import EventBus, Listener, Subscription
from .errors import UserError
from .events import AgentEvent, Decision
from .hooks import Hooks
from .messages import Message
from .providers.base import ModelSettings, Provider, ThinkingLevel, ToolSpec
from .result import RunResult
from .retry import RetryPolicy
from .run import AgentRun
from .system_prompt import default_system_prompt
from .tools import Tool, as_tool
from .usage import ContextWindow, Usage, estimate_tokens

__all__ = ["Agent"]

_TERMINAL = frozenset({"run_finished", "run_failed", "run_cancelled"})


class Agent:
    """An LLM agent with tools.

    Args:
        model: ``"<endpoint>/<model>"`` (e.g. ``"anthropic/claude-sonnet-4-5"``) or a
            :class:`~ipyagent.agentlib.providers.Provider` instance such as a ``ScriptedModel``.
        tools: Functions or :class:`Tool` objects the model may call.
        system: The system prompt; ``None`` builds the default one.
        max_turns: Model calls allowed in one run before it stops as ``exhausted``.
        auto_approve: Run tools that change things without asking.
        can_write: ``False`` refuses every tool that is not read-only.
        tool_timeout: Seconds a tool call may take (a tool's own ``timeout`` wins).
        thinking: Reasoning effort to ask for: ``none``, ``low``, ``medium`` or ``high``.
        retry: How model requests are retried on rate limits, overload and dropped connections.
        messages: A transcript to continue.
    """

    def __init__(
        self,
        *,
        model: str | Provider | None = None,
        tools: Sequence[Tool | Callable[..., Any]] = (),
        system: str | None = None,
        max_turns: int = 50,
        auto_approve: bool = False,
        can_write: bool = True,
        tool_timeout: float = 120.0,
        thinking: ThinkingLevel | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        retry: RetryPolicy | None = None,
        hooks: Hooks | None = None,
        messages: Sequence[Message] = (),
        max_repeated_calls: int = 3,
        max_consecutive_failures: int = 5,
        max_result_chars: int = 30_000,
    ) -> None:
        if max_turns < 1:
            raise UserError(
                "max_turns must be at least 1.", hint="Pass e.g. max_turns=50.", code="invalid_option"
            )
        self.model = model
        self.tools: list[Tool] = []
        for t in tools:
            self.add_tool(t)
        self.system = system
        self.max_turns = max_turns
        self.auto_approve = auto_approve
        self.can_write = can_write
        self.tool_timeout = tool_timeout
        self.settings = ModelSettings(thinking=thinking, max_tokens=max_tokens, temperature=temperature)
        self.retry = retry or RetryPolicy()
        self.hooks = hooks or Hooks()
        self.max_repeated_calls = max_repeated_calls
        self.max_consecutive_failures = max_consecutive_failures
        self.max_result_chars = max_result_chars
        self._messages: list[Message] = []
        self._call_ids: set[str] = set()  # every tool-call id in the transcript, kept as it grows
        for message in messages:
            self._append(message)
        self._usage = Usage()
        self._context: ContextWindow | None = None
        self._bus = EventBus()
        self._pending = PendingAnswers()
        self._always_allowed: set[str] = set()
        self._queued: list[str] = []
        self._queue_lock = threading.Lock()
        self._task: asyncio.Task[RunResult] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._provider: Provider | None = None

    # -- configuration ---------------------------------------------------------------------------

    def add_tool(self, t: Tool | Callable[..., Any]) -> Tool:
        """Add a tool (a function or a :class:`Tool`); a tool of the same name is replaced."""
        built = as_tool(t)
        self.tools = [existing for existing in self.tools if existing.name != built.name] + [built]
        return built

    @property
    def provider(self) -> Provider:
        """The resolved model. Raises :class:`UserError` when none is configured or known."""
        if self._provider is None or (isinstance(self.model, str) and self._provider.model_id != self.model):
            self._provider = _resolve(self.model)
        return self._provider

    def system_prompt(self, tools: Sequence[ToolSpec] | None = None) -> str:
        specs = [t.spec for t in self.tools] if tools is None else tools
        return self.system if self.system is not None else default_system_prompt(specs)

    # -- state -----------------------------------------------------------------------------------

    @property
    def messages(self) -> list[Message]:
        """The whole transcript (a copy)."""
        return list(self._messages)

    @property
    def usage(self) -> Usage:
        """Usage summed over every request this agent made."""
        return self._usage

    @property
    def context(self) -> ContextWindow:
        """How much of the model's context window the conversation fills."""
        if self._context is not None:
            return self._context
        limit = self._provider.context_limit if self._provider else None
        return ContextWindow(used=estimate_tokens(self.system_prompt(), self._messages), limit=limit)

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def reset(self) -> None:
        """Forget the conversation (not the configuration)."""
        self._require_idle("reset")
        self._messages.clear()
        self._call_ids.clear()
        self._context = None

    # -- runs ------------------------------------------------------------------------------------

    async def run(self, prompt: str) -> RunResult:
        """Run the agent on ``prompt`` until the model answers; return the :class:`RunResult`.

        Failures do not raise: they come back as ``status="failed"`` with ``error`` set (call
        ``result.raise_for_status()`` to raise). Only misconfiguration raises :class:`UserError`.
        """
        self._require_idle("run")
        provider = self.provider
        self._loop = asyncio.get_running_loop()
        agent_run = AgentRun(self, provider, prompt)
        task = asyncio.ensure_future(agent_run.execute())
        self._task = task
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.cancelled():  # agent.cancel() landed before the run took its first step
                return agent_run.cancelled_before_start()
            # Our caller was cancelled (not agent.cancel()): stop the run, let it tidy up, propagate.
            task.cancel()
            await asyncio.wait({task})
            raise
        finally:
            self._task = None

    def run_sync(self, prompt: str) -> RunResult:
        """:meth:`run` for scripts. In a notebook or any running event loop, use ``await agent.run(...)``."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.run(prompt))
        raise UserError(
            "run_sync() cannot be used while an event loop is running (as in Jupyter).",
            hint="Use `await agent.run(...)` instead, or the %%agent cell magic.",
            code="loop_running",
        )

    async def stream(self, prompt: str) -> AsyncIterator[AgentEvent]:
        """Run the agent, yielding every event as it happens. Leaving the loop early cancels the run."""
        queue = self._bus.open_stream()
        task = asyncio.ensure_future(self.run(prompt))
        task.add_done_callback(lambda _: queue.put_nowait(None))
        try:
            while (event := await queue.get()) is not None:
                yield event
                if event.type in _TERMINAL:
                    break
            await task
        finally:
            self._bus.close_stream(queue)
            if not task.done():
                self.cancel()
                await asyncio.wait({task})

    def cancel(self) -> bool:
        """Stop the run in flight (from any thread). Returns False when nothing was running.

        Calls that never ran get a "cancelled" result, so the transcript stays valid. A sync tool
        already running in a worker thread cannot be interrupted; its result is discarded.
        """
        task, loop = self._task, self._loop
        if task is None or task.done() or loop is None:
            return False
        if _on_loop_thread(loop):
            task.cancel()
        else:
            loop.call_soon_threadsafe(task.cancel)
        return True

    def send(self, text: str) -> None:
        """Queue more input for the run in flight: it goes to the model after the current turn's
        tool results, merged into one user message. With no run in flight, it opens the next run."""
        with self._queue_lock:
            self._queued.append(text)

    def resolve_permission(self, call_id: str, decision: Decision) -> bool:
        """Answer a ``permission_required`` event: ``"allow"``, ``"always"`` (this tool, for the
        rest of the conversation) or ``"deny"``. Returns False when nothing waits for that call."""
        if decision not in ("allow", "always", "deny"):
            raise UserError(f"Unknown decision {decision!r}.", hint="Use 'allow', 'always' or 'deny'.")
        return self._pending.resolve(f"permission:{call_id}", decision)

    def answer(self, question_id: str, answer: str | None) -> bool:
        """Answer an ``ask_user_required`` event (``None`` declines to answer)."""
        return self._pending.resolve(f"ask:{question_id}", answer)

    def on(self, event: str | type[BaseModel], listener: Listener) -> Subscription:
        """Call ``listener(event)`` for every event of a type (``"text_delta"`` or ``TextDelta``;
        ``"*"`` for all). Returns a handle whose ``remove()`` unregisters it."""
        return self._bus.on(event, listener)

    # -- for the run -----------------------------------------------------------------------------

    def _append(self, message: Message) -> None:
        self._messages.append(message)
        self._call_ids.update(call.id for call in message.tool_calls)

    def _take_queued(self) -> str:
        with self._queue_lock:
            queued, self._queued = self._queued, []
        return "\n\n".join(queued)

    def _someone_can_answer(self, event_type: str) -> bool:
        return self._bus.has_listener(event_type) or self._bus.has_stream

    def _require_idle(self, what: str) -> None:
        if self.running:
            raise UserError(
                f"Cannot {what} while a run is in flight.",
                hint="Wait for it, cancel it with agent.cancel(), or queue input with agent.send(...).",
                code="run_in_progress",
            )

    def __repr__(self) -> str:
        model = self.model if isinstance(self.model, str) or self.model is None else self.model.model_id
        return f"Agent(model={model!r}, tools={[t.name for t in self.tools]}, messages={len(self._messages)})"


def _resolve(model: str | Provider | None) -> Provider:
    if model is None:
        raise UserError(
            "No model configured.",
            hint='Pass model="<endpoint>/<model>", e.g. Agent(model="openai/gpt-4.1").',
            code="no_model",
        )
    if isinstance(model, str):
        from .endpoints import provider_for  # HTTP adapters load only when a model string is used

        return provider_for(model)
    return model


def _on_loop_thread(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False
