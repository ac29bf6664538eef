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

With ``Agent(session="name.agent.jsonl")`` the conversation is durable: every committed message,
usage record, settings change and compaction is appended to that file, and opening the same path
later resumes it (see :mod:`~ipyagent.agentlib.sessions`). This module owns the configuration
and what crosses threads into a run (events, answers, queued input); the transcript, its usage
and its session file belong to the :class:`~ipyagent.agentlib.conversation.Conversation` the
agent holds, the loop to :mod:`~ipyagent.agentlib.run`, the file format to
:mod:`~ipyagent.agentlib.sessions`, summarizing to :mod:`~ipyagent.agentlib.compaction`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from .asks import Inbox, PendingAnswers
from .attachments import Attachment, attachment_blocks
from .budget import Budget
from .bus import EventBus, Listener, Subscription
from .compaction import CompactionResult, compact_conversation
from .conversation import Conversation, open_session
from .delegation import DELEGATE, Delegation, delegate_tool
from .errors import UserError
from .events import AgentEvent, Decision, MapProgress
from .hooks import Hooks, screener
from .messages import Message
from .model import ModelSettings, PromptCache, Provider, ThinkingLevel, ToolChoice, ToolSpec
from .model_slots import ModelSlots
from .output import output_spec
from .plugins import Plugin, Plugins
from .project_context import ProjectContext, load_project_context
from .request_redaction import RequestRedactor, redact_requests_default
from .result import RunResult
from .retry import RetryPolicy
from .run import AgentRun
from .run_config import RunConfig, check_run_options
from .sessions import Session
from .system_prompt import build_system_prompt
from .tool_choice import ToolChoicePolicy, call_named_tools, check_tool_choice
from .tools import Tool, as_tool
from .usage import ContextWindow, Usage, estimate_tokens

if TYPE_CHECKING:
    from .maps import MapExecutor
    from .mcp_servers import McpServers

__all__ = ["Agent"]


class Agent:
    """An LLM agent with tools.

    Args:
        model: ``"<endpoint>/<model>"`` (e.g. ``"anthropic/claude-sonnet-4-5"``) or a
            :class:`~ipyagent.agentlib.providers.Provider` instance such as a ``ScriptedModel``.
        utility_model: The model of side calls — compaction's summaries, the ``summaries``
            plugin's — as a model id or a provider. ``None``: the endpoint's small model where one
            is known and cheaper (``gpt-4.1-mini``, ``claude-haiku-4-5``, ...; see
            :func:`~ipyagent.agentlib.endpoints.utility_model_id`), else ``model``. Their usage is
            in :attr:`usage` and, apart, in :attr:`utility_usage`.
        tools: Functions or :class:`Tool` objects the model may call.
        system: The system prompt; ``None`` builds the default one.
        max_turns: Model calls allowed in one run before it stops as ``exhausted``.
        auto_approve: Run tools that change things without asking.
        can_write: ``False`` refuses every tool that is not read-only.
        tool_timeout: Seconds a tool call may take (a tool's own ``timeout`` wins).
        thinking: Reasoning effort to ask for: ``none``, ``low``, ``medium`` or ``high``.
        prompt_cache: How long the provider caches the prompt's prefix: ``"5m"``, ``"1h"``, ``"off"``.
        retry: How model requests are retried on rate limits, overload and dropped connections.
        messages: A transcript to continue.
        session: A session file (``"analysis.agent.jsonl"``) or an open :class:`Session`: created
            when absent, resumed when present (transcript, model, settings, usage), appended to as
            the conversation goes. Options left at ``None`` (model, thinking, ...) take the
            session's values; ones given win and are recorded.
        notebook: The notebook the conversation belongs to, written in a new session's header.
        workspace: The project folder (default: the current directory). The system prompt
            names it and includes its ``AGENTS.md`` and skill catalog.
        compact_threshold: Compact when the context passes this fraction of the model's window
            (when the window is known); ``None`` compacts only on overflow or on demand.
        compact_keep: Messages kept verbatim by a compaction.
        tool_choice: Which tools the model may call: ``"auto"``, ``"none"``, ``"required"``, a
            list of tool names, or a policy ``(messages, tools) -> choice`` asked before each
            request. A fixed choice holds until the model has called a tool in the run. The
            default, :func:`~ipyagent.agentlib.tool_choice.call_named_tools`, requires the
            tools that the user's message tells the model to call by name ("call X", "use X");
            see :mod:`ipyagent.agentlib.tool_choice`.
        budget: Caps on each run's tokens, cost and wall time: a
            :class:`~ipyagent.agentlib.budget.Budget`, a dict of its fields or a string
            (``"tokens=50k,cost=0.5,time=5m"``). A run that reaches one stops ``exhausted``.
        conversation_budget: Caps on the conversation's total tokens, cost and wall time (counted
            in its session file); a run that would pass them stops ``exhausted``.
        redact_requests: Mask secrets (API keys of the environment and the config file, and
            anything shaped like a key) in what is sent to the model; the conversation keeps
            what was written. ``None`` takes ``redact_requests`` from the config file (default
            on). See :mod:`ipyagent.agentlib.request_redaction`.
        mcp: MCP servers whose tools join the runs, named ``<server>__<tool>``:
            ``{"time": {"command": "python", "args": ["-m", "mcp_server_time"]}}`` (or ``url`` and
            ``headers``), added to those of the config file and the workspace's ``.mcp.json``; an
            :class:`~ipyagent.agentlib.mcp_servers.McpServers` to share; ``False`` for none. Each
            server is enabled by the user once; one of the workspace's ``.mcp.json`` only by a
            person's approval of that exact entry, never by ``auto_approve`` (see
            :mod:`ipyagent.agentlib.mcp_servers`).
        delegate: Offer the model the ``delegate`` tool, which hands a task to a sub-agent with
            some of this agent's tools, its restrictions, what is left of its budget and a
            conversation of its own (saved beside this one's session): ``True``, or a
            :class:`~ipyagent.agentlib.delegation.Delegation` to set how deep, how long and on
            which models (see :mod:`ipyagent.agentlib.delegation`).
        plugins: Plugins whose context, tools and hooks join each run (``agent.plugins``, by
            name; see :mod:`ipyagent.agentlib.plugins`): e.g. ``[Summaries(), Memory()]``.
        verify: Before a run completes with numbers in its answer that no tool output of the
            run shows, ask the model once to compute them with a tool or correct the answer
            (``result.claims`` says which are traced; see :mod:`ipyagent.agentlib.claims`).
    """

    def __init__(
        self,
        *,
        model: str | Provider | None = None,
        utility_model: str | Provider | None = None,
        tools: Sequence[Tool | Callable[..., Any]] = (),
        system: str | None = None,
        max_turns: int = 50,
        auto_approve: bool = False,
        can_write: bool = True,
        tool_timeout: float = 120.0,
        thinking: ThinkingLevel | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        prompt_cache: PromptCache = "5m",
        retry: RetryPolicy | None = None,
        hooks: Hooks | None = None,
        messages: Sequence[Message] = (),
        max_repeated_calls: int = 3,
        max_consecutive_failures: int = 5,
        max_result_chars: int = 30_000,
        session: str | os.PathLike[str] | Session | None = None,
        notebook: str | None = None,
        workspace: str | os.PathLike[str] | None = None,
        compact_threshold: float | None = 0.85,
        compact_keep: int = 6,
        tool_choice: ToolChoice | ToolChoicePolicy = call_named_tools,
        budget: Budget | Mapping[str, Any] | str | None = None,
        conversation_budget: Budget | Mapping[str, Any] | str | None = None,
        redact_requests: bool | None = None,
        mcp: McpServers | Mapping[str, Any] | bool | None = None,
        delegate: bool | Delegation = False,
        plugins: Plugins | Sequence[Plugin] = (),
        verify: bool = False,
    ) -> None:
        check_run_options(max_turns=max_turns, compact_threshold=compact_threshold)
        self._bus = EventBus()
        self._models = ModelSlots(model, utility_model)
        self._settings = ModelSettings(
            thinking=thinking, max_tokens=max_tokens, temperature=temperature, prompt_cache=prompt_cache
        )
        self.tools: list[Tool] = []
        for t in tools:
            self.add_tool(t)
        self.system = system
        self.max_turns = max_turns
        self.auto_approve = auto_approve
        self.can_write = can_write
        self.tool_timeout = tool_timeout
        self.retry = retry or RetryPolicy()
        self.hooks = hooks or Hooks()
        self.plugins = Plugins.of(plugins)
        self.verify = verify
        self.redact_requests = redact_requests_default() if redact_requests is None else redact_requests
        self.max_repeated_calls = max_repeated_calls
        self.max_consecutive_failures = max_consecutive_failures
        self.max_result_chars = max_result_chars
        self.workspace = Path(os.path.abspath(workspace if workspace is not None else os.getcwd()))
        self.compact_threshold = compact_threshold
        self.compact_keep = compact_keep
        self.tool_choice = tool_choice
        self.budget = budget  # the setter coerces a dict or a string
        self.conversation_budget = conversation_budget
        self.delegate = delegate  # the setter checks it
        self._project: ProjectContext | None = None
        opened: Session | None = None
        if session is not None:
            opened = open_session(session, model=_model_id(model), notebook=notebook, messages=messages)
        self._conversation = Conversation(emit=self._bus.emit, session=opened)
        if opened is not None:
            self._adopt_session_settings(opened)
        for message in messages:
            self._conversation.append(message)
        if opened is not None:
            self._record_settings()
        # What reaches a run from other threads: answers to its questions, and queued input.
        self._answers = PendingAnswers()
        self._inbox = Inbox()
        #: Tools the user allowed with "always", for the rest of the conversation.
        self._always_allowed: set[str] = set()
        self._task: asyncio.Task[RunResult] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._mcp, self._owns_mcp = None, False
        if mcp is not False:
            from .mcp_servers import servers_for_agent

            self._mcp, self._owns_mcp = servers_for_agent(mcp, self.workspace)

    # -- configuration ---------------------------------------------------------------------------

    def add_tool(self, t: Tool | Callable[..., Any]) -> Tool:
        """Add a tool (a function or a :class:`Tool`); a tool of the same name is replaced."""
        built = as_tool(t)
        self.tools = [existing for existing in self.tools if existing.name != built.name] + [built]
        return built

    @property
    def model(self) -> str | Provider | None:
        """The model: ``"<endpoint>/<model>"`` or a provider. Setting it is recorded in the session."""
        return self._models.model

    @model.setter
    def model(self, value: str | Provider | None) -> None:
        self._models.set_model(value)
        self._record_settings()

    @property
    def utility_model(self) -> str | Provider | None:
        """The model of side calls (see ``Agent(utility_model=...)``); ``None``: chosen by ``model``."""
        return self._models.utility_model

    @utility_model.setter
    def utility_model(self, value: str | Provider | None) -> None:
        self._models.set_utility_model(value)

    @property
    def settings(self) -> ModelSettings:
        """Thinking, max_tokens and temperature for requests. Setting it is recorded in the session."""
        return self._settings

    @settings.setter
    def settings(self, value: ModelSettings) -> None:
        self._settings = value
        self._record_settings()

    @property
    def budget(self) -> Budget | None:
        """Caps on each run (see ``Agent(budget=...)``); set a Budget, a dict or a string."""
        return self._budget

    @budget.setter
    def budget(self, value: Budget | Mapping[str, Any] | str | None) -> None:
        self._budget = Budget.of(value)

    @property
    def conversation_budget(self) -> Budget | None:
        """Caps on the conversation's total tokens, cost and the wall time of its runs."""
        return self._conversation_budget

    @conversation_budget.setter
    def conversation_budget(self, value: Budget | Mapping[str, Any] | str | None) -> None:
        self._conversation_budget = Budget.of(value)

    @property
    def delegate(self) -> Delegation | None:
        """How the model may hand tasks to sub-agents (``None``: it may not); set ``True``,
        ``False`` or a :class:`~ipyagent.agentlib.delegation.Delegation`."""
        return self._delegation

    @delegate.setter
    def delegate(self, value: bool | Delegation | None) -> None:
        self._delegation = Delegation.of(value)

    @property
    def tool_choice(self) -> ToolChoice | ToolChoicePolicy:
        """Which tools the model may call in a run (see ``Agent(tool_choice=...)``)."""
        return self._tool_choice

    @tool_choice.setter
    def tool_choice(self, value: ToolChoice | ToolChoicePolicy) -> None:
        self._tool_choice = check_tool_choice(value)

    @property
    def provider(self) -> Provider:
        """The resolved model. Raises :class:`UserError` when none is configured or known."""
        return self._models.provider()

    @property
    def utility_provider(self) -> Provider:
        """The resolved model of side calls: ``utility_model``, else the endpoint's small model
        (:func:`~ipyagent.agentlib.endpoints.utility_model_id`), else :attr:`provider`."""
        return self._models.utility()

    def system_prompt(self, tools: Sequence[ToolSpec | Tool] | None = None) -> str:
        """The system prompt for a turn offering ``tools`` (default: this agent's tools)."""
        if self.system is not None:
            return self.system
        given = self._tools_for_run() if tools is None else tools
        specs = [t.spec if isinstance(t, Tool) else t for t in given]
        from .mcp_servers.mapping import McpTool

        # An MCP server's tools are listed apart, their descriptions quoted as the server's text.
        servers = {t.name: t.server for t in given if isinstance(t, McpTool)}
        return build_system_prompt(
            specs, workspace=self.workspace, project=self.project_context, servers=servers
        )

    @property
    def project_context(self) -> ProjectContext:
        """``AGENTS.md`` and the skills of the workspace, as read at the start of the last run."""
        if self._project is None:
            self._project = load_project_context(self.workspace)
        return self._project

    # -- state -----------------------------------------------------------------------------------

    @property
    def messages(self) -> list[Message]:
        """The whole transcript (a copy)."""
        return list(self._conversation.messages)

    @property
    def usage(self) -> Usage:
        """Usage summed over every request made for this conversation (since its last reset)."""
        return self._conversation.usage

    @property
    def utility_usage(self) -> Usage:
        """The part of :attr:`usage` spent on side calls (compaction's and plugins' summaries)."""
        return self._conversation.utility_usage

    @property
    def seconds(self) -> float:
        """Wall time summed over this conversation's finished runs (since its last reset)."""
        return self._conversation.seconds

    @property
    def context(self) -> ContextWindow:
        """How much of the model's context window the conversation fills."""
        if (known := self._conversation.context) is not None:
            return known
        limit = self._models.resolved.context_limit if self._models.resolved else None
        return ContextWindow(
            used=estimate_tokens(self.system_prompt(), self._conversation.messages), limit=limit
        )

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    @property
    def session(self) -> Session | None:
        """The session file this conversation is saved in (``.path``, ``.id``), if any."""
        return self._conversation.session

    def reset(self) -> None:
        """Forget the conversation (not the configuration).

        With a session, a ``reset`` record is appended: the file keeps the earlier history, and
        resuming it gives the empty conversation that follows the reset.
        """
        self._require_idle("reset")
        self._require_writable("reset")
        self._conversation.reset()

    def fork(self, at: int | None = None, *, session: str | os.PathLike[str] | None = None) -> Agent:
        """A new agent with the same configuration whose conversation is ``messages[:at]``.

        Args:
            at: How many messages to keep (default: all). It must not separate a tool call from
                its results.
            session: A new session file for the fork (it must not exist yet); ``None`` keeps the
                fork in memory.
        """
        self._require_idle("fork")
        messages = self._conversation.messages
        count = len(messages) if at is None else at
        if not 0 <= count <= len(messages):
            raise UserError(
                f"Cannot fork at {at}: the conversation has {len(messages)} messages.",
                hint=f"Pass at= between 0 and {len(messages)}.",
                code="invalid_fork_point",
            )
        if count and messages[count - 1].tool_calls:
            raise UserError(
                f"Cannot fork at {count}: message {count - 1} calls tools whose results are message "
                f"{count}, and a fork must not separate them.",
                hint=f"Fork at {count - 1} (before the calls) or {count + 1} (after the results).",
                code="invalid_fork_point",
            )
        opened = None
        if session is not None:
            parent = self.session
            opened = Session.open(
                session,
                exclusive=True,
                model=_model_id(self._models.model),
                notebook=parent.notebook if parent else None,
                forked_from={"session": parent.id, "at": count} if parent else None,
                fsync=parent.fsync if parent else True,
            )
        try:
            return Agent(**self._config(), session=opened, messages=messages[:count])
        except BaseException:
            if opened is not None:
                opened.close()
            raise

    def close(self) -> None:
        """Close the session file (releasing its lock; the agent can no longer run), and let go of
        the model's connections: the agents of one endpoint share them, and the last to let go
        closes them."""
        self._conversation.close()
        self._models.release()
        if self._mcp is not None and self._owns_mcp:
            self._mcp.close()

    async def compact(self, focus: str = "") -> CompactionResult:
        """Summarize the older part of the conversation now, keeping the last ``compact_keep``
        messages verbatim. ``focus`` tells the summary what matters most."""
        self._require_idle("compact")
        self._require_writable("compact")
        return await compact_conversation(
            self._conversation,
            self.utility_provider,
            keep=self.compact_keep,
            settings=self.settings,
            retry=self.retry,
            reason="manual",
            focus=focus,
            emit=self._bus.emit,
            screen=screener(self.hooks, RequestRedactor() if self.redact_requests else None, self._bus.emit),
        )

    # -- runs ------------------------------------------------------------------------------------

    async def run(
        self,
        prompt: str,
        *,
        tool_choice: ToolChoice | ToolChoicePolicy | None = None,
        attachments: Sequence[Attachment] = (),
        output_type: Any = None,
        output_retries: int = 2,
    ) -> RunResult:
        """Run the agent on ``prompt`` until the model answers; return the :class:`RunResult`.

        Failures do not raise: they come back as ``status="failed"`` with ``error`` set (call
        ``result.raise_for_status()`` to raise). Only misconfiguration raises :class:`UserError`.
        ``tool_choice`` replaces the agent's for this run (see ``Agent(tool_choice=...)``).
        ``attachments`` go with the prompt: image files as images, text files as their text,
        or blocks (see :mod:`ipyagent.agentlib.attachments`).

        ``output_type`` asks for a typed answer: a pydantic model, a dataclass, a ``TypedDict``,
        a ``Literal``, a list of them, or a type like ``int``. The model may call tools first;
        its final answer is validated into the type and returned as ``result.output``. An
        invalid answer is shown its problems and asked again, up to ``output_retries`` times;
        then the run fails with an ``invalid_output`` error (:class:`OutputValidationError`).
        """
        self._require_idle("run")
        self._require_writable("run")
        choice = None if tool_choice is None else check_tool_choice(tool_choice)
        attached = attachment_blocks(attachments)
        provider = self.provider
        self._loop = asyncio.get_running_loop()
        self._refresh_project()
        config = self._run_config(provider, choice, output_type=output_type, output_retries=output_retries)
        agent_run = AgentRun(
            self._conversation,
            config,
            prompt,
            attachments=attached,
            bus=self._bus,
            answers=self._answers,
            inbox=self._inbox,
            always_allowed=self._always_allowed,
        )
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

    async def map(
        self,
        items: Iterable[Any],
        prompt: str | Callable[[Any], str],
        *,
        output_type: Any = None,
        output_retries: int = 2,
        concurrency: int = 8,
        budget: Budget | Mapping[str, Any] | str | None = None,
        checkpoint: str | os.PathLike[str] | bool = True,
        retry_failed: bool = False,
        progress: bool | Callable[[MapProgress], Any] = True,
        executor: MapExecutor | Any = None,
    ) -> Any:
        """Ask the same question of every item; results come back aligned with ``items``.

        ``items``: a list, a pandas Series or a DataFrame (its rows); ``prompt``: a template with
        ``{item}`` (or a row's columns: ``"Classify: {title}"``) or a function of the item. Each
        item is its own conversation with this agent's model, tools and settings (the agent's own
        is not touched), up to ``concurrency`` at once; ``output_type`` types answers as in
        :meth:`run`. A failing item is recorded with its error and does not stop the others.
        ``budget`` caps the map (``"tokens=2M,cost=5,time=1h"``): it ends ``exhausted``.

        Every finished item is appended to ``checkpoint`` as it finishes (by default
        ``agent-map-<hash>.jsonl`` in the working directory, the hash naming the call: prompts,
        output type and model; ``False`` for none). Running the same call again resumes: items
        on file are not asked again (failed ones neither, unless ``retry_failed``). A checkpoint
        of another call is never reused: a warning names it and the map starts its own file.

        Returns a :class:`~ipyagent.agentlib.maps.MapResult` for a list (``result[i]``,
        ``.errors``, ``.to_pandas()``), a DataFrame on the input's index for pandas input (the
        output's fields or one ``output`` column, and ``error``). ``progress``: a line on stderr
        (done, failed, tokens, cost, time left), a function given each ``MapProgress``, or
        ``False``. ``executor`` decides where items run: a Dask ``distributed.Client`` runs them on
        its cluster (see :mod:`~ipyagent.agentlib.executors`, ``maps.MapExecutor``)."""
        from .executors import executor_for
        from .maps import run_map

        config = self._run_config(self.provider, output_type=output_type, output_retries=output_retries)
        return await run_map(
            replace(config, plugins=()),  # an item is no conversation of the user's
            items,
            prompt,
            concurrency=concurrency,
            budget=Budget.of(budget),
            checkpoint=checkpoint,
            retry_failed=retry_failed,
            executor=executor_for(executor),
            progress=progress,
            emit=self._bus.emit,
        )

    def run_sync(
        self,
        prompt: str,
        *,
        tool_choice: ToolChoice | ToolChoicePolicy | None = None,
        attachments: Sequence[Attachment] = (),
        output_type: Any = None,
        output_retries: int = 2,
    ) -> RunResult:
        """:meth:`run` for scripts. In a notebook or any running event loop, use ``await agent.run(...)``."""
        with contextlib.suppress(RuntimeError):  # raised when no event loop runs: the usual case
            asyncio.get_running_loop()
            raise UserError(
                "run_sync() cannot be used while an event loop is running (as in Jupyter).",
                hint="Use `await agent.run(...)` instead, or the %%agent cell magic.",
                code="loop_running",
            )
        return asyncio.run(
            self.run(
                prompt,
                tool_choice=tool_choice,
                attachments=attachments,
                output_type=output_type,
                output_retries=output_retries,
            )
        )

    async def stream(
        self,
        prompt: str,
        *,
        tool_choice: ToolChoice | ToolChoicePolicy | None = None,
        attachments: Sequence[Attachment] = (),
        output_type: Any = None,
        output_retries: int = 2,
    ) -> AsyncIterator[AgentEvent]:
        """Run the agent, yielding every event as it happens; leaving the loop early cancels the run.
        A sub-agent's events come too, with ``event.via`` naming the delegate call (``()`` for this
        agent's own); the stream ends with this agent's own ``run_finished`` (or failure)."""
        run = self.run(
            prompt,
            tool_choice=tool_choice,
            attachments=attachments,
            output_type=output_type,
            output_retries=output_retries,
        )
        async with contextlib.aclosing(self._bus.stream_run(run, cancel=self.cancel)) as events:
            async for event in events:  # closed with this generator: the run is cancelled at once
                yield event

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
        self._inbox.put(text)

    def resolve_permission(self, call_id: str, decision: Decision, *, reason: str = "") -> bool:
        """Answer a ``permission_required`` event: ``"allow"``, ``"always"`` (this tool, for the
        rest of the conversation) or ``"deny"``. A ``reason`` given with a denial is what the
        model reads instead of "the user declined". Returns False when nothing waits for that call.
        A sub-agent's prompts (``event.via`` set) are answered here too."""
        if decision not in ("allow", "always", "deny"):
            raise UserError(f"Unknown decision {decision!r}.", hint="Use 'allow', 'always' or 'deny'.")
        return self._answers.resolve(f"permission:{call_id}", (decision, reason))

    def answer(self, question_id: str, answer: str | None) -> bool:
        """Answer an ``ask_user_required`` event, a sub-agent's too (``None`` declines to answer)."""
        return self._answers.resolve(f"ask:{question_id}", answer)

    def on(self, event: str | type[BaseModel], listener: Listener) -> Subscription:
        """Call ``listener(event)`` for every event of a type (``"text_delta"`` or ``TextDelta``;
        ``"*"`` for all). Returns a handle whose ``remove()`` unregisters it."""
        return self._bus.on(event, listener)

    # -- for the run -----------------------------------------------------------------------------

    def _run_config(
        self,
        provider: Provider,
        tool_choice: ToolChoice | ToolChoicePolicy | None = None,
        *,
        output_type: Any = None,
        output_retries: int = 2,
    ) -> RunConfig:
        """What a run reads of this agent, fixed for the run (the tools and their system prompt
        included); ``tool_choice`` replaces the agent's; ``output_type`` asks for a typed answer."""
        check_run_options(output_retries=output_retries)
        tools = self._tools_for_run()
        output = output_spec(output_type, taken=[t.name for t in tools])
        utility = self.utility_provider if provider is self.provider else None
        return RunConfig(
            provider=provider,
            utility=utility if utility is not provider else None,
            system=self.system_prompt(tools),
            tools=tuple(tools),
            model=_model_id(self._models.model),
            settings=self._settings,
            hooks=self.hooks,
            redact_requests=self.redact_requests,
            retry=self.retry,
            max_turns=self.max_turns,
            max_repeated_calls=self.max_repeated_calls,
            max_consecutive_failures=self.max_consecutive_failures,
            max_result_chars=self.max_result_chars,
            tool_timeout=self.tool_timeout,
            can_write=self.can_write,
            auto_approve=self.auto_approve,
            compact_threshold=self.compact_threshold,
            compact_keep=self.compact_keep,
            tool_choice=self.tool_choice if tool_choice is None else tool_choice,
            budget=self.budget,
            conversation_budget=self.conversation_budget,
            tool_sources=(self._mcp,) if self._mcp is not None else (),
            system_for=self.system_prompt,
            output=output,
            output_retries=output_retries,
            plugins=self.plugins.active(),
            verify=self.verify,
        )

    @property
    def mcp(self) -> McpServers | None:
        """The MCP servers whose tools join the runs (``None`` with ``mcp=False``)."""
        return self._mcp

    def _tools_for_run(self) -> list[Tool]:
        """The agent's tools, plus ``load_skill`` when the workspace has skills and ``delegate``
        when the agent may delegate."""
        tools = list(self.tools)
        if self.system is None:
            loader = self.project_context.load_skill_tool()
            if loader is not None and not any(t.name == loader.name for t in tools):
                tools.append(loader)
        if self._delegation is not None and not any(t.name == DELEGATE for t in tools):
            tools.append(delegate_tool(self._delegation))
        return tools

    def _refresh_project(self) -> None:
        self._project = None  # read AGENTS.md and the skills afresh at the start of each run

    # -- the session -----------------------------------------------------------------------------

    def _adopt_session_settings(self, opened: Session) -> None:
        """Options left at ``None`` take the session's recorded values."""
        recorded = opened.state.settings
        if self._models.model is None and opened.model is not None:
            self._models.model = opened.model
        self._settings = self._settings.model_copy(
            update={
                k: recorded[k]
                for k in ("thinking", "max_tokens", "temperature")
                if getattr(self._settings, k) is None and recorded.get(k) is not None
            }
        )

    def _record_settings(self) -> None:
        """Append a settings record when the model or settings differ from the last recorded."""
        self._conversation.record_settings(_model_id(self._models.model), self._settings)

    def _config(self) -> dict[str, Any]:
        return {
            "model": self._models.model,
            "utility_model": self._models.utility_model,
            "tools": list(self.tools),
            "system": self.system,
            "max_turns": self.max_turns,
            "auto_approve": self.auto_approve,
            "can_write": self.can_write,
            "tool_timeout": self.tool_timeout,
            **self._settings.model_dump(),  # thinking, max_tokens, temperature, prompt_cache
            "retry": self.retry,
            "hooks": self.hooks,
            "redact_requests": self.redact_requests,
            "max_repeated_calls": self.max_repeated_calls,
            "max_consecutive_failures": self.max_consecutive_failures,
            "max_result_chars": self.max_result_chars,
            "workspace": self.workspace,
            "compact_threshold": self.compact_threshold,
            "compact_keep": self.compact_keep,
            "tool_choice": self.tool_choice,
            "budget": self.budget,
            "conversation_budget": self.conversation_budget,
            "mcp": self._mcp if self._mcp is not None else False,
            "delegate": self._delegation or False,
            "plugins": self.plugins,
            "verify": self.verify,
        }

    def _require_writable(self, what: str) -> None:
        self._conversation.require_writable(what)

    def _require_idle(self, what: str) -> None:
        if self.running:
            raise UserError(
                f"Cannot {what} while a run is in flight.",
                hint="Wait for it, cancel it with agent.cancel(), or queue input with agent.send(...).",
                code="run_in_progress",
            )

    def __repr__(self) -> str:
        model = _model_id(self._models.model)
        tools = [t.name for t in self.tools]
        session = self.session
        saved = f", session={str(session.path)!r}" if session is not None else ""
        return f"Agent(model={model!r}, tools={tools}, messages={len(self._conversation.messages)}{saved})"


def _model_id(model: str | Provider | None) -> str | None:
    if model is None or isinstance(model, str):
        return model
    return model.model_id


def _on_loop_thread(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False
