"""Hooks: code that runs before and after each model call and each tool call.

Before-hooks guard, so they fail closed: a before-model hook that raises fails the run, a
before-tool hook that raises blocks that call (raise :class:`BlockToolCall` to give the model a
reason). After-hooks observe, so they fail open: an exception is logged and ignored. Hooks may be
sync or async.

    agent.hooks.before_tool_call(lambda call: ...)     # or use it as a decorator

Policies (:mod:`.policy`) are before-hooks that only decide: ``Pass()`` or ``Block(...)``,
within a timeout, failing closed. At each point the order is fixed, and this module owns it
(:func:`prepare_request`, :func:`check_tool_call`):

- a model request: the before-model hooks (which may replace it), then the built-in redaction
  of secrets (:mod:`.request_redaction`), then the model policies, which so see the request
  exactly as it will be sent;
- a tool call: the before-tool hooks (which may rewrite the arguments), then the tool policies;
- the summary request of a compaction: the redaction and the model policies only
  (:func:`screener`); the before-model hooks shape the loop's own requests.

Within each list, hooks run in the order they were added, those of included hooks
(``Hooks(include=[...])``, e.g. the kernel's) first; the first to block wins.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar, overload

from .errors import HookError, PolicyBlocked
from .events import AgentEvent, RunWarning
from .messages import Message
from .model import ModelRequest
from .policy import DEFAULT_POLICY_TIMEOUT, Blocked, Policy, ask

__all__ = [
    "BlockToolCall",
    "Hooks",
    "ToolCallBlocked",
    "ToolCallInfo",
    "check_tool_call",
    "fail_open",
    "prepare_request",
    "screen_request",
    "screener",
]

H = TypeVar("H", bound=Callable[..., Any])


class BlockToolCall(Exception):
    """Raise in a before-tool hook to stop the call; the message is what the model reads."""


@dataclass(frozen=True)
class ToolCallInfo:
    """A tool call as hooks see it. A before-tool hook may return a new ``arguments`` dict."""

    call_id: str
    name: str
    arguments: dict[str, Any]
    read_only: bool


@dataclass
class Hooks:
    """The hooks and policies of an agent (``agent.hooks``); register with the methods below,
    used plain or as decorators."""

    before_model: list[Callable[[ModelRequest], Any]] = field(default_factory=list)
    after_model: list[Callable[[Message], Any]] = field(default_factory=list)
    before_tool: list[Callable[[ToolCallInfo], Any]] = field(default_factory=list)
    after_tool: list[Callable[[ToolCallInfo, Any], Any]] = field(default_factory=list)
    #: Policies asked about each model request and each tool call (see :mod:`.policy`).
    model_policies: list[Policy] = field(default_factory=list)
    tool_policies: list[Policy] = field(default_factory=list)
    #: Seconds a policy may take, unless it was added with its own ``timeout``.
    policy_timeout: float = DEFAULT_POLICY_TIMEOUT
    #: Other hooks that run before these, at every point: a ``%%agent`` conversation's own hooks
    #: include the kernel's (``ipyagent.kernel.hooks``).
    include: list[Hooks] = field(default_factory=list)

    def chain(self) -> list[Hooks]:
        """The hooks to run, in order: each included one's chain, then these; each once."""
        if not self.include:  # the common case, asked several times a round
            return [self]
        order: list[Hooks] = []
        open_: list[Hooks] = []  # being visited: an include cycle stops here

        def visit(hooks: Hooks) -> None:
            if any(hooks is h for h in (*order, *open_)):
                return
            open_.append(hooks)
            for included in hooks.include:
                visit(included)
            open_.pop()
            order.append(hooks)

        visit(self)
        return order

    def before_model_call(self, fn: H) -> H:
        """``fn(request)``; return a new :class:`ModelRequest` to replace it, raise to fail the run."""
        self.before_model.append(fn)
        return fn

    def after_model_call(self, fn: H) -> H:
        """``fn(message)`` with the committed assistant message."""
        self.after_model.append(fn)
        return fn

    def before_tool_call(self, fn: H) -> H:
        """``fn(call: ToolCallInfo)``; return a dict to rewrite the arguments, raise to block."""
        self.before_tool.append(fn)
        return fn

    def after_tool_call(self, fn: H) -> H:
        """``fn(call: ToolCallInfo, result: ToolResult event)``."""
        self.after_tool.append(fn)
        return fn

    @overload
    def model_policy(self, fn: H, *, timeout: float | None = None) -> H: ...
    @overload
    def model_policy(self, fn: None = None, *, timeout: float | None = None) -> Callable[[H], H]: ...
    def model_policy(self, fn: H | None = None, *, timeout: float | None = None) -> H | Callable[[H], H]:
        """``fn(request: ModelRequest)`` returns ``Pass()`` or ``Block(...)``: asked before each
        model request, after the before-model hooks and the redaction of secrets. Use as
        ``@hooks.model_policy`` or ``@hooks.model_policy(timeout=2)``."""
        return _add_policy(self.model_policies, fn, timeout)

    @overload
    def tool_policy(self, fn: H, *, timeout: float | None = None) -> H: ...
    @overload
    def tool_policy(self, fn: None = None, *, timeout: float | None = None) -> Callable[[H], H]: ...
    def tool_policy(self, fn: H | None = None, *, timeout: float | None = None) -> H | Callable[[H], H]:
        """``fn(call: ToolCallInfo)`` returns ``Pass()`` or ``Block(...)``: asked before each
        tool call, after the before-tool hooks. A blocked call is not run; the model reads the
        block's message."""
        return _add_policy(self.tool_policies, fn, timeout)

    def remove(self, fn: Callable[..., Any]) -> None:
        """Remove ``fn`` wherever it was added (hook or policy)."""
        for hooks in (self.before_model, self.after_model, self.before_tool, self.after_tool):
            while fn in hooks:
                hooks.remove(fn)
        for policies in (self.model_policies, self.tool_policies):
            policies[:] = [p for p in policies if p.fn is not fn]


def _add_policy(policies: list[Policy], fn: H | None, timeout: float | None) -> H | Callable[[H], H]:
    def add(fn: H) -> H:
        policies.append(Policy(fn, timeout))
        return fn

    return add if fn is None else add(fn)


class ToolCallBlocked(Exception):
    """A tool policy blocked the call: ``blocked`` says which and what to show."""

    def __init__(self, blocked: Blocked) -> None:
        super().__init__(blocked.message)
        self.blocked = blocked


async def prepare_request(
    hooks: Hooks, request: ModelRequest, *, redact: Callable[[ModelRequest], ModelRequest] | None
) -> ModelRequest:
    """The request to send: ``request`` through the before-model hooks, the redaction (when
    ``redact`` is given) and the model policies, in that order.

    Raises :class:`HookError` when a before-model hook raises, and
    :class:`~.errors.PolicyBlocked` when a policy blocks."""
    for fn in [fn for h in hooks.chain() for fn in h.before_model]:
        try:
            replaced = await call_hook(fn, request)
        except Exception as exc:
            raise HookError(
                f"The before-model hook {hook_name(fn)} raised {type(exc).__name__}: {exc}",
                hint="Fix or remove the hook (agent.hooks.remove(fn)); it blocks every model call.",
            ) from exc
        if isinstance(replaced, ModelRequest):
            request = replaced
    return await screen_request(hooks, request, redact=redact)


async def screen_request(
    hooks: Hooks, request: ModelRequest, *, redact: Callable[[ModelRequest], ModelRequest] | None
) -> ModelRequest:
    """``request`` masked (when ``redact`` is given), then asked about by the model policies;
    raises :class:`~.errors.PolicyBlocked` when one blocks."""
    if redact is not None:
        request = redact(request)
    for owner in hooks.chain():
        for policy in list(owner.model_policies):
            blocked = await ask(policy, request, timeout=owner.policy_timeout)
            if blocked is not None:
                raise PolicyBlocked.from_block(blocked)
    return request


def screener(
    hooks: Hooks, redact: Callable[[ModelRequest], ModelRequest] | None, emit: Callable[[Any], None]
) -> Callable[[ModelRequest], Awaitable[ModelRequest]]:
    """:func:`screen_request` for a request the loop does not build (a compaction's summary),
    announcing a block with a ``blocked_by_policy`` event through ``emit``."""

    async def screen(request: ModelRequest) -> ModelRequest:
        try:
            return await screen_request(hooks, request, redact=redact)
        except PolicyBlocked as exc:
            if exc.blocked is not None:
                emit(exc.blocked.event("model_request"))
            raise

    return screen


async def check_tool_call(hooks: Hooks, info: ToolCallInfo) -> ToolCallInfo:
    """The call to make: ``info`` through the before-tool hooks (a returned dict replaces the
    arguments) and the tool policies, in that order.

    Raises :class:`BlockToolCall` when a hook blocks or raises (its text is what the model
    reads), :class:`ToolCallBlocked` when a policy blocks."""
    for fn in [fn for h in hooks.chain() for fn in h.before_tool]:
        try:
            rewritten = await call_hook(fn, info)
        except BlockToolCall as exc:
            raise BlockToolCall(f"Blocked: {exc}") from exc
        except Exception as exc:  # fail closed: a guard that breaks must not let the call through
            raise BlockToolCall(f"Blocked by hook {hook_name(fn)}: {type(exc).__name__}: {exc}") from exc
        if isinstance(rewritten, dict):
            info = replace(info, arguments=rewritten)
    for owner in hooks.chain():
        for policy in list(owner.tool_policies):
            blocked = await ask(policy, info, timeout=owner.policy_timeout)
            if blocked is not None:
                raise ToolCallBlocked(blocked)
    return info


async def call_hook(fn: Callable[..., Any], *args: Any) -> Any:
    result = fn(*args)
    if inspect.isawaitable(result):
        result = await result
    return result


def hook_name(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__qualname__", None) or repr(fn)


async def fail_open(fn: Callable[..., Any], *args: Any, emit: Callable[[AgentEvent], None]) -> None:
    """Call an after-hook: one that raises is logged and reported as a ``hook_failed`` warning,
    and the run goes on."""
    try:
        await call_hook(fn, *args)
    except Exception as exc:
        logging.getLogger("ipyagent").warning(
            "ipyagent: after-hook %s raised %s: %s (ignored)", hook_name(fn), type(exc).__name__, exc
        )
        emit(
            RunWarning(
                code="hook_failed", message=f"The hook {hook_name(fn)} raised {type(exc).__name__}: {exc}"
            )
        )
