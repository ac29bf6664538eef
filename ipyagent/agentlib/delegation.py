"""Sub-agents: the ``delegate`` tool, with which the model hands a task to a child agent.

    agent = Agent(model="openai/gpt-4.1", tools=[read_file, search_files], delegate=True)

The model calls ``delegate(task, tools=[...], model=...)``; a child run does the task with its
own conversation, and the model reads the child's final answer as the call's result. In a
notebook: ``%%agent --tools python,files,delegate``.

What a child may do is never more than its parent may, whatever the model asks for:

- **tools**: the ones named, each one the parent's run has (an unknown name is an error result
  the model reads); by default all of the parent's but ``delegate``;
- **permissions**: ``can_write``, ``auto_approve``, hooks, policies and request redaction are the
  parent's, as they are: a child of a read-only agent is read-only;
- **budget**: what is left of the parent's run and conversation caps; the child's usage counts as
  the parent's as it is spent (``agent.usage`` and the run's usage include it), and its requests
  reserve tokens from the parent's own token ledger, which its siblings share: children running
  at once spend no more than the parent's cap together;
- **turns**: ``Delegation(max_turns=...)``, never more than the parent's ``max_turns``;
- **depth**: a child delegates further only where ``Delegation(max_depth=...)`` allows it (the
  default, 1, does not);
- **model**: the parent's, or one of ``Delegation(models=[...])``.

The child's permission prompts and questions go to the parent's user: its events reach the
parent's bus with ``via`` naming the delegate call (see :mod:`~ipyagent.agentlib.events`), and
``agent.resolve_permission`` / ``agent.answer`` on the parent answer them; where nobody can
answer the parent, nobody can answer the child, and its tools that ask are denied. Cancelling the
parent cancels the child: it runs in its own task, cancelled with the call.

When the parent's conversation is saved (``analysis.agent.jsonl``), the child's is saved beside
it (``analysis.agent.delegate-1.jsonl``): its header names the parent's session and the call, and
the parent's session records the child's file. ``Agent(session=that_file)`` resumes it.

This module owns the rules above and the child's session file; the loop (:mod:`.run`) lends the
delegate call what it needs (:class:`~ipyagent.agentlib.parent_run.ParentRun`) and runs the child.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from .asks import Inbox
from .budget import Budget
from .clip import clip_head
from .conversation import Conversation
from .errors import AgentError, UserError
from .events import RunWarning, SubagentStarted, UsageUpdated
from .model import Provider
from .parent_run import ParentRun
from .result import RunResult
from .run import AgentRun
from .sessions import Session
from .tool_choice import call_named_tools
from .tools import RunContext, Tool, ToolOutput, tool
from .usage import Usage

__all__ = ["DELEGATE", "SUBAGENT_NOTE", "Delegation", "delegate_tool", "run_subagent", "subagent_file"]

#: The delegate tool's name.
DELEGATE = "delegate"

#: Added to a sub-agent's system prompt.
SUBAGENT_NOTE = (
    "You are a sub-agent: another agent handed you the task in the user's message. Do it with the "
    "tools you have, then answer with what the task asks for, complete and concise: your answer is "
    "all the other agent sees of your work. If you cannot do it, say why."
)


@dataclass(frozen=True, kw_only=True)
class Delegation:
    """How an agent may hand tasks to sub-agents (``Agent(delegate=Delegation(...))``).

    Args:
        max_depth: How many levels of sub-agents there may be below the agent: 1 (the default)
            lets it delegate and its sub-agents not; 2 lets them delegate once more.
        max_turns: Model calls a sub-agent's run may make (never more than its parent's
            ``max_turns``, the default).
        models: Models a sub-agent may be given besides the parent's (``"<endpoint>/<model>"``).
        max_answer_chars: The longest answer the parent's model reads; a longer one is cut.
        timeout: Seconds a sub-agent may work before it is stopped (its questions to the user
            included).
    """

    max_depth: int = 1
    max_turns: int | None = None
    models: Sequence[str] = ()
    max_answer_chars: int = 10_000
    timeout: float = 3600.0

    def __post_init__(self) -> None:
        for name, value in (
            ("max_depth", self.max_depth),
            ("max_turns", self.max_turns),
            ("max_answer_chars", self.max_answer_chars),
        ):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise UserError(
                    f"Delegation({name}=...) must be a whole number of at least 1, not {value!r}.",
                    hint="For example Delegation(max_depth=1, max_turns=10).",
                    code="invalid_option",
                )
        if not self.timeout > 0 or not math.isfinite(self.timeout):
            raise UserError(
                f"Delegation(timeout=...) must be a positive number of seconds, not {self.timeout!r}.",
                hint="For example Delegation(timeout=600).",
                code="invalid_option",
            )
        # One model named alone is a list of one, not of its characters.
        models = (self.models,) if isinstance(self.models, str) else tuple(self.models)
        object.__setattr__(self, "models", models)

    @classmethod
    def of(cls, value: bool | Delegation | None) -> Delegation | None:
        """``True`` as the default delegation, ``False``/``None`` as none."""
        if value is None or value is False:
            return None
        if value is True:
            return cls()
        if isinstance(value, Delegation):
            return value
        raise UserError(
            f"Invalid delegate={value!r}.",
            hint="Pass delegate=True, or delegate=Delegation(max_depth=..., max_turns=..., models=[...]).",
            code="invalid_option",
        )


def delegate_tool(delegation: Delegation | None = None) -> Tool:
    """The ``delegate`` tool, following ``delegation``'s rules (default :class:`Delegation`).

    ``Agent(delegate=True)`` offers it; give it to an agent yourself with ``tools=[...]`` only
    when you build runs by hand."""
    settings = delegation or Delegation()

    async def delegate(
        task: str, tools: list[str] | None = None, model: str | None = None, *, ctx: RunContext
    ) -> ToolOutput:
        """Hand a self-contained task to a sub-agent, which works on it with its own conversation
        and the tools you give it, and answers with its result. Use it for a side task whose
        details you do not need to see (a search through many files, a check, a summary);
        describe the task fully, since the sub-agent sees nothing of this conversation.

        Args:
            task: What the sub-agent must do and what it should answer with, in full.
            tools: The names of the tools it may use: some of yours, only what the task needs
                (default: all of yours but delegate).
            model: The model it runs on (default: yours).
        """
        return await run_subagent(ctx.parent_run(), settings, task=task, tools=tools, model=model)

    description = None
    if settings.models:
        description = (
            "Hand a self-contained task to a sub-agent, which works on it with its own conversation and "
            "the tools you give it, and answers with its result. Describe the task fully: the sub-agent "
            "sees nothing of this conversation. Models it may run on besides yours: "
            f"{', '.join(settings.models)}."
        )
    return tool(delegate, read_only=True, timeout=settings.timeout, description=description)


async def run_subagent(
    parent: ParentRun,
    delegation: Delegation,
    *,
    task: str,
    tools: Sequence[str] | None = None,
    model: str | None = None,
) -> ToolOutput:
    """Run ``task`` in a sub-agent of ``parent`` under ``delegation``'s rules; what the parent's
    model reads is the child's answer, or an error result saying why there is none."""
    config = parent.config
    if not task.strip():
        return _error("The task is empty. Call delegate again with the task described in full.")
    depth = config.depth + 1
    available = {t.name: t for t in config.tools}
    if tools is None:
        names = [name for name in available if name != DELEGATE]
    else:
        names = list(dict.fromkeys(name.strip() for name in tools if name.strip()))
        unknown = [name for name in names if name not in available]
        if unknown:
            offered = ", ".join(n for n in available if n != DELEGATE or depth < delegation.max_depth)
            return _error(
                f"Unknown tool(s) for the sub-agent: {', '.join(unknown)}. A sub-agent can be given only "
                f"tools you have: {offered or '(none)'}. Call delegate again with some of those."
            )
    if DELEGATE in names and depth >= delegation.max_depth:
        if tools is not None:
            return _error(
                f"A sub-agent here cannot delegate further (it would be {depth} level(s) deep, and the "
                f"limit is {delegation.max_depth}). Call delegate again without `{DELEGATE}` in its tools."
            )
        names.remove(DELEGATE)
    provider, owned = _provider(config.provider, config.model, model, delegation)
    if isinstance(provider, str):
        return _error(provider)
    try:
        budget = parent.budget_left()
        if isinstance(budget, str):
            return _error(f"No budget is left for a sub-agent: {budget}")
        return await _run_child(parent, delegation, task, names, provider, budget, depth)
    finally:
        if owned:
            close = getattr(provider, "close", None)
            if close is not None:
                close()


async def _run_child(
    parent: ParentRun,
    delegation: Delegation,
    task: str,
    names: list[str],
    provider: Provider,
    budget: Budget | None,
    depth: int,
) -> ToolOutput:
    config = parent.config
    chosen = tuple(t for t in config.tools if t.name in names)
    system = config.system_for(chosen) if config.system_for is not None else config.system
    child_config = replace(
        config,
        provider=provider,
        model=provider.model_id,
        system=f"{system}\n\n{SUBAGENT_NOTE}",
        tools=chosen,
        max_turns=min(delegation.max_turns or config.max_turns, config.max_turns),
        budget=budget,
        conversation_budget=None,  # the parent's is in ``budget``: what is left of it
        tool_choice=call_named_tools,
        tool_sources=(),
        system_for=None,
        depth=depth,
        plugins=(),  # a sub-agent's run is no conversation of the user's
    )
    bus = parent.bus.nested(parent.call_id)
    session = _open_session(parent, provider.model_id)
    parent.bus.emit(
        SubagentStarted(
            call_id=parent.call_id,
            task=task,
            tools=[t.name for t in chosen],
            model=provider.model_id,
            session=session.path.name if isinstance(session, Session) else None,
        )
    )
    if isinstance(session, str):
        parent.bus.emit(RunWarning(code="session_write_failed", message=session))
        session = None
    rolled = Usage()

    def roll_up(event: UsageUpdated) -> None:
        nonlocal rolled
        if not event.via:  # the child's own requests (a grandchild's reach it as the child's)
            rolled = rolled + event.request
            parent.count_usage(event.request)

    bus.on(UsageUpdated, roll_up)
    conversation = Conversation(emit=bus.emit, session=session)
    child = AgentRun(
        conversation,
        child_config,
        task,
        bus=bus,
        answers=parent.answers,
        inbox=Inbox(),
        always_allowed=parent.always_allowed,
        reserved_ids=parent.call_ids,
        ledger=parent.ledger,  # one token budget for the parent and all its children at once
    )
    running = asyncio.ensure_future(child.execute())
    try:
        result = await asyncio.shield(running)
    except asyncio.CancelledError:
        # The parent was cancelled (or the call timed out): stop the child, let it tidy up.
        running.cancel()
        await asyncio.wait({running})
        if running.cancelled():  # before its first step: it still says it ended
            child.cancelled_before_start()
        raise
    finally:
        conversation.close()
    if (rest := _minus(result.usage, rolled)).requests or _tokens(rest):
        parent.count_usage(rest)  # what no usage event carried (a compaction's summary requests)
    return _answer(result, delegation)


def subagent_file(parent: Path, number: int) -> Path:
    """Where the ``number``-th sub-agent of the conversation saved in ``parent`` is saved:
    ``analysis.agent.jsonl`` → ``analysis.agent.delegate-1.jsonl``, beside it."""
    stem = parent.name.removesuffix(".jsonl")
    return parent.with_name(f"{stem}.{DELEGATE}-{number}.jsonl")


def _open_session(parent: ParentRun, model: str) -> Session | str | None:
    """The child's session beside the parent's (``None`` when the parent's is not saved), or
    why it could not be created."""
    saved = parent.session
    if saved is None or saved.read_only or saved.closed:
        return None
    header = {"session": saved.id, "file": saved.path.name, "call_id": parent.call_id}
    number = len(saved.state.subagents) + 1
    for _ in range(1000):  # past files left by another kernel, or by hand
        path = subagent_file(saved.path, number)
        number += 1
        if path.exists():
            continue
        try:
            opened = Session.open(
                path,
                exclusive=True,
                model=model,
                notebook=saved.notebook,
                parent=header,
                fsync=saved.fsync,
            )
        except UserError as exc:
            if exc.info.code == "session_exists":
                continue
            return f"The sub-agent's conversation could not be saved ({exc.info.message}); it runs in memory."
        parent.record_child(opened)
        return opened
    return "The sub-agent's conversation could not be saved (no free file name); it runs in memory."


def _provider(
    current: Provider, current_id: str | None, wanted: str | None, delegation: Delegation
) -> tuple[Provider | str, bool]:
    """The child's provider and whether it is the child's own (closed after it), or why the model
    asked for cannot be had."""
    if wanted is None or not wanted.strip() or wanted in (current_id, current.model_id):
        return current, False
    wanted = wanted.strip()
    if wanted not in delegation.models:
        allowed = ", ".join((current.model_id, *delegation.models))
        return (
            f"A sub-agent cannot run on {wanted}: the models it may use are {allowed}. "
            "Call delegate again with one of them, or without a model (it then runs on yours).",
            False,
        )
    from .endpoints import provider_for  # only when another model is asked for

    try:
        return provider_for(wanted), True
    except AgentError as exc:
        return f"The model {wanted} cannot be used: {exc.info.message} {exc.info.hint}".strip(), False


def _answer(result: RunResult, delegation: Delegation) -> ToolOutput:
    text = clip_head(result.text.strip(), delegation.max_answer_chars, "the sub-agent's answer")
    if result.status == "completed":
        return ToolOutput(text=text or "(The sub-agent finished without an answer.)")
    if result.status == "exhausted":
        so_far = f"\nWhat it had so far:\n{text}" if text else ""
        return _error(f"The sub-agent stopped before it finished: {result.reason}{so_far}")
    if result.status == "failed":
        error = result.error
        why = f"{error.message} {error.hint}".strip() if error is not None else result.reason
        return _error(f"The sub-agent failed: {why}")
    if result.status == "cancelled":
        return _error("The sub-agent was cancelled before it finished.")
    raise AssertionError(result.status)  # pragma: no cover - RunStatus is closed


def _minus(total: Usage, part: Usage) -> Usage:
    """``total`` less ``part``, field by field (never below zero)."""
    cost = None
    if total.cost is not None:
        cost = max(0.0, total.cost - (part.cost or 0.0)) or None
    return Usage(
        input_tokens=max(0, total.input_tokens - part.input_tokens),
        output_tokens=max(0, total.output_tokens - part.output_tokens),
        cache_read_tokens=max(0, total.cache_read_tokens - part.cache_read_tokens),
        cache_write_tokens=max(0, total.cache_write_tokens - part.cache_write_tokens),
        cache_write_1h_tokens=max(0, total.cache_write_1h_tokens - part.cache_write_1h_tokens),
        reasoning_tokens=max(0, total.reasoning_tokens - part.reasoning_tokens),
        cost=cost,
        # A saving may be negative (writes not yet read back): it is not clipped at zero.
        cache_saved=None if total.cache_saved is None else total.cache_saved - (part.cache_saved or 0.0),
        requests=max(0, total.requests - part.requests),
    )


def _tokens(usage: Usage) -> int:
    return usage.input_tokens + usage.output_tokens + usage.cache_read_tokens


def _error(text: str) -> ToolOutput:
    return ToolOutput(text=text, is_error=True)
