"""The events an agent run emits: one closed union, discriminated by ``type``.

Widgets, logs, session writers and tests all consume the same objects. Every event is a frozen
pydantic model and serializes to JSON through :data:`EVENT_ADAPTER`; code that branches over
events ends in ``assert_never`` so that a new event type is a type error until handled.

Order within a run::

    run_started
      [ask_user_required → ask_user_answered]  (enabling an MCP server, once)
      request_started  (text|thinking)_(start|delta|end)*  tool_call_(start|delta|end)*
        usage?  request_done | request_error(will_retry → the request's parts are discarded)
      message_committed (the assistant message)
      [permission_required → permission_resolved]  tool_executing  tool_result   (per call)
      (a policy's refusal: blocked_by_policy, then the call's tool_result or the run's run_failed)
      message_committed (the tool results)
      ...
    run_finished | run_failed | run_cancelled

A run that delegates (the ``delegate`` tool, :mod:`~ipyagent.agentlib.delegation`) announces
the child with ``subagent_started``; the child run's own events then follow on the parent's bus
as they happen, each with ``via`` naming the delegate call it came through (outermost first),
so a listener tells them apart from the parent's: ``event.via == ()`` is the agent's own run.
A child's ``permission_required`` and ``ask_user_required`` are answered like the parent's,
with ``agent.resolve_permission(call_id, ...)`` and ``agent.answer(question_id, ...)``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeAlias, get_args

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from .claims import Claim
from .deprecation import retired_names
from .errors import ErrorInfo
from .messages import FinishReason, Message
from .usage import ContextWindow, Usage

__all__ = [
    "EVENT_ADAPTER",
    "EVENT_TYPES",
    "AgentEvent",
    "AskUserAnswered",
    "AskUserRequired",
    "AttachmentSent",
    "BlockedByPolicy",
    "Claim",
    "CompactionCompleted",
    "CompactionStarted",
    "MapProgress",
    "MessageCommitted",
    "PermissionRequired",
    "PermissionResolved",
    "RequestDone",
    "RequestError",
    "RequestStarted",
    "RunCancelled",
    "RunFailed",
    "RunFinished",
    "RunStarted",
    "RunWarning",
    "SubagentStarted",
    "TextDelta",
    "TextEnd",
    "TextStart",
    "ThinkingDelta",
    "ThinkingEnd",
    "ThinkingStart",
    "ToolCallDelta",
    "ToolCallEnd",
    "ToolCallStart",
    "ToolExecuting",
    "ToolResult",
    "UsageUpdated",
]

# Schemas are built on first use, not at import: `%load_ext ipyagent` stays fast.
_DEFERRED = ConfigDict(defer_build=True)

RunStatus = Literal["completed", "failed", "cancelled", "exhausted"]
Decision = Literal["allow", "always", "deny"]


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)

    #: The delegate calls this event came through, outermost first: ``()`` for the agent's own
    #: run, ``("call_1",)`` for the run of the sub-agent that call ``call_1`` started, and so on.
    via: tuple[str, ...] = ()


# -- run lifecycle -------------------------------------------------------------------------------


class RunStarted(_Event):
    type: Literal["run_started"] = "run_started"
    run_id: str
    model: str
    prompt: str


class RunFinished(_Event):
    """The run ended on its own: ``completed``, or ``exhausted`` when max_turns ran out.
    ``claims``: the numbers and named values of a completed run's answer, traced to its tool
    outputs (see :mod:`~ipyagent.agentlib.claims`)."""

    type: Literal["run_finished"] = "run_finished"
    run_id: str
    status: Literal["completed", "exhausted"]
    text: str
    usage: Usage
    message: str = ""
    claims: tuple[Claim, ...] = ()


class RunFailed(_Event):
    type: Literal["run_failed"] = "run_failed"
    run_id: str
    error: ErrorInfo
    usage: Usage


class RunCancelled(_Event):
    type: Literal["run_cancelled"] = "run_cancelled"
    run_id: str
    usage: Usage


# -- model requests ------------------------------------------------------------------------------


class RequestStarted(_Event):
    type: Literal["request_started"] = "request_started"
    turn: int
    attempt: int = 1
    model: str


class RequestDone(_Event):
    type: Literal["request_done"] = "request_done"
    turn: int
    finish_reason: FinishReason
    usage: Usage
    duration: float


class RequestError(_Event):
    """A model request failed. With ``will_retry`` the loop retries after ``retry_in`` seconds
    and whatever the failed attempt streamed is discarded."""

    type: Literal["request_error"] = "request_error"
    turn: int
    attempt: int
    error: ErrorInfo
    will_retry: bool
    retry_in: float | None = None


# -- streamed content: ``index`` is the block's position in the assistant message ---------------


class TextStart(_Event):
    type: Literal["text_start"] = "text_start"
    index: int


class TextDelta(_Event):
    type: Literal["text_delta"] = "text_delta"
    index: int
    delta: str


class TextEnd(_Event):
    type: Literal["text_end"] = "text_end"
    index: int
    text: str


class ThinkingStart(_Event):
    type: Literal["thinking_start"] = "thinking_start"
    index: int


class ThinkingDelta(_Event):
    type: Literal["thinking_delta"] = "thinking_delta"
    index: int
    delta: str


class ThinkingEnd(_Event):
    type: Literal["thinking_end"] = "thinking_end"
    index: int
    text: str
    duration: float


class ToolCallStart(_Event):
    type: Literal["tool_call_start"] = "tool_call_start"
    index: int
    call_id: str
    name: str


class ToolCallDelta(_Event):
    """A fragment of the call's JSON arguments, as the model streams them."""

    type: Literal["tool_call_delta"] = "tool_call_delta"
    call_id: str
    delta: str


class ToolCallEnd(_Event):
    type: Literal["tool_call_end"] = "tool_call_end"
    call_id: str
    name: str
    arguments: dict[str, Any] | None
    raw_arguments: str


# -- tools and the people around them ------------------------------------------------------------


class ToolExecuting(_Event):
    type: Literal["tool_executing"] = "tool_executing"
    call_id: str
    name: str
    arguments: dict[str, Any]


class ToolResult(_Event):
    """A tool call's outcome. ``content`` is what the model reads; ``display`` (a MIME bundle or
    a list of them) is for the user only and never reaches the model."""

    type: Literal["tool_result"] = "tool_result"
    call_id: str
    name: str
    content: str
    is_error: bool = False
    display: dict[str, Any] | list[dict[str, Any]] | None = None
    duration: float = 0.0


class PermissionRequired(_Event):
    type: Literal["permission_required"] = "permission_required"
    call_id: str
    name: str
    arguments: dict[str, Any]
    description: str = ""
    #: Set when the call would change a control file (``.mcp.json``, ``AGENTS.md``, ...): what
    #: the file is, and that this is asked even under auto-approve. Show it with the question.
    warning: str = ""


class PermissionResolved(_Event):
    type: Literal["permission_resolved"] = "permission_resolved"
    call_id: str
    decision: Decision
    reason: str = ""


class AskUserRequired(_Event):
    type: Literal["ask_user_required"] = "ask_user_required"
    question_id: str
    question: str
    choices: list[str] = []


class AskUserAnswered(_Event):
    type: Literal["ask_user_answered"] = "ask_user_answered"
    question_id: str
    answer: str | None


class BlockedByPolicy(_Event):
    """A policy refused a model request (the run then fails with ``policy_blocked``) or a tool
    call (the model reads ``message`` as the call's result; ``call_id`` names it). Everything
    here is safe to show: ``message`` holds no prompt and no secret, ``metadata`` only plain
    values with sensitive keys redacted (see :mod:`~ipyagent.agentlib.policy`). ``why`` is
    ``block`` when the policy said so, or how it failed: ``raised``, ``timeout``, ``invalid``."""

    type: Literal["blocked_by_policy"] = "blocked_by_policy"
    target: Literal["model_request", "tool_call"]
    policy: str
    why: Literal["block", "raised", "timeout", "invalid"]
    message: str
    metadata: dict[str, str | int | float | bool | None] = {}
    call_id: str | None = None
    tool: str | None = None


class SubagentStarted(_Event):
    """The ``delegate`` call ``call_id`` handed ``task`` to a sub-agent, with ``tools``, on
    ``model``; its conversation is saved in the file named ``session`` (beside the parent's), or
    nowhere (``None``). The sub-agent's events follow with ``via`` ending in ``call_id``."""

    type: Literal["subagent_started"] = "subagent_started"
    call_id: str
    task: str
    tools: list[str] = []
    model: str
    session: str | None = None


# -- bookkeeping ---------------------------------------------------------------------------------


class RunWarning(_Event):
    """Something the user should know that does not stop the run (a retry, a repaired session)."""

    type: Literal["run_warning"] = "run_warning"
    code: str
    message: str
    hint: str = ""


class UsageUpdated(_Event):
    type: Literal["usage_updated"] = "usage_updated"
    request: Usage
    total: Usage
    context: ContextWindow
    #: What the run has spent of its budget, e.g. "12,400 / 50,000 tokens · $0.21 / $0.50";
    #: None when the run has no budget.
    budget: str | None = None


class AttachmentSent(_Event):
    """Something sent with the prompt besides its text (the notebook's context, a mentioned
    variable, a file), for the views to show: ``label`` names it, ``tokens`` estimates its size."""

    type: Literal["attachment_sent"] = "attachment_sent"
    label: str
    text: str
    tokens: int


class MessageCommitted(_Event):
    type: Literal["message_committed"] = "message_committed"
    message: Message


class CompactionStarted(_Event):
    """Older turns are being summarized: ``messages`` is the transcript's length before."""

    type: Literal["compaction_started"] = "compaction_started"
    reason: Literal["threshold", "overflow", "manual"]
    messages: int


class CompactionCompleted(_Event):
    """``dropped`` messages were replaced by ``summary``; the last ``kept`` stay verbatim.
    ``fallback`` marks a mechanical digest used because the model could not summarize;
    ``dropped == 0`` means there was nothing to compact."""

    type: Literal["compaction_completed"] = "compaction_completed"
    dropped: int
    summary: str
    fallback: bool = False
    kept: int = 0
    summary_hash: str = ""


# -- maps ----------------------------------------------------------------------------------------


class MapProgress(_Event):
    """How an ``agent.map`` is going (emitted as items finish, at most a few times a second,
    and once more at the end with ``finished``). ``resumed`` items were read from the
    checkpoint; ``remaining`` is the estimated seconds left (``None`` until items finish)."""

    type: Literal["map_progress"] = "map_progress"
    total: int
    done: int
    failed: int
    resumed: int = 0
    running: int = 0
    usage: Usage
    elapsed: float
    remaining: float | None = None
    finished: bool = False
    status: Literal["running", "completed", "exhausted", "cancelled"] = "running"
    checkpoint: str | None = None

    def __str__(self) -> str:
        """``map 120/1,000 · 3 failed · 45,210 tokens · $0.12 · 1m20s left`` and so on."""
        usage = self.usage
        parts = [f"map {self.done + self.failed:,}/{self.total:,}"]
        if self.failed:
            parts.append(f"{self.failed:,} failed")
        if self.resumed:
            parts.append(f"{self.resumed:,} from the checkpoint")
        parts.append(f"{usage.input_tokens + usage.cache_read_tokens + usage.output_tokens:,} tokens")
        if usage.cost is not None:
            parts.append(f"${usage.cost:.2f}")
        if self.finished:
            parts.append(f"{_duration(self.elapsed)} · {self.status}")
        elif self.remaining is not None:
            parts.append(f"{_duration(self.remaining)} left")
        return " · ".join(parts)


def _duration(seconds: float) -> str:
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole}s"
    minutes, rest = divmod(whole, 60)
    return f"{minutes}m{rest:02d}s" if minutes < 60 else f"{minutes // 60}h{minutes % 60:02d}m"


AgentEvent: TypeAlias = Annotated[
    RunStarted
    | RunFinished
    | RunFailed
    | RunCancelled
    | RequestStarted
    | RequestDone
    | RequestError
    | TextStart
    | TextDelta
    | TextEnd
    | ThinkingStart
    | ThinkingDelta
    | ThinkingEnd
    | ToolCallStart
    | ToolCallDelta
    | ToolCallEnd
    | ToolExecuting
    | ToolResult
    | PermissionRequired
    | PermissionResolved
    | AskUserRequired
    | AskUserAnswered
    | BlockedByPolicy
    | SubagentStarted
    | RunWarning
    | UsageUpdated
    | MessageCommitted
    | AttachmentSent
    | CompactionStarted
    | CompactionCompleted
    | MapProgress,
    Field(discriminator="type"),
]
EVENT_ADAPTER: TypeAdapter[AgentEvent] = TypeAdapter(AgentEvent, config=_DEFERRED)

#: Every event class by its ``type`` literal — what ``agent.on("text_delta", ...)`` looks up.
EVENT_TYPES: dict[str, type[BaseModel]] = {
    cls.model_fields["type"].default: cls for cls in get_args(get_args(AgentEvent)[0])
}

#: Type names of the previous release, still accepted by ``agent.on`` (with a warning).
RETIRED_TYPES = {"warning": "run_warning", "usage": "usage_updated"}
__getattr__ = retired_names(
    __name__, {"Warning": (RunWarning, "use RunWarning (it shadowed the builtin Warning)")}
)
