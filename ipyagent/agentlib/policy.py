"""Policies: hooks that decide, before each model request and each tool call, whether it may go.

    from ipyagent import Hooks, Pass, Block

    hooks = Hooks()

    @hooks.model_policy
    def no_customer_ids(request):
        if any("CUST-" in m.text for m in request.messages):
            return Block("Customer ids may not leave this machine.", metadata={"rule": "pii-1"})
        return Pass()

A policy returns :class:`Pass` or :class:`Block`. It fails closed: one that raises, takes longer
than its timeout or returns anything else blocks, like a :class:`Block`. Policies run in the
order they were added; the first block wins and the later ones are not asked.

What a block shows is safe to show: the :class:`Block`'s own ``message`` (with secrets masked),
or for a policy that failed only its name and how it failed, never the exception's text (which
may quote the prompt). ``metadata`` keeps plain values only (str, int, float, bool, None) and
redacts the value of any key whose name suggests something sensitive (``prompt``, ``reason``,
``secret``, ``token``, ``password``, ``credential``, ``key``, ...).

This module owns the decision types and how one policy is asked (:func:`ask`); the order of all
the hooks at a point is :mod:`.hooks`'.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from .clip import clip
from .events import BlockedByPolicy
from .redact import REDACTED, known_secrets, mask_secrets
from .workers import policy_workers

__all__ = [
    "DEFAULT_POLICY_TIMEOUT",
    "Block",
    "Blocked",
    "Pass",
    "Plain",
    "Policy",
    "PolicyDecision",
    "ask",
    "safe_metadata",
]

log = logging.getLogger("ipyagent.policy")

#: Seconds a policy may take before it is taken to have blocked.
DEFAULT_POLICY_TIMEOUT = 5.0
#: How much of a block's message and of a metadata string is shown.
MAX_MESSAGE_CHARS = 500
MAX_METADATA_CHARS = 200
MAX_METADATA_ITEMS = 20

Plain: TypeAlias = str | int | float | bool | None

# Key names whose values are withheld: a substring match, case-insensitive ("api_key",
# "AuthToken", "user_password", "debug_reason" all match). Erring towards hiding is the point.
_SENSITIVE_KEY = re.compile(
    r"prompt|reason|secret|token|passw|credential|key|auth|cookie|session|private|signature",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Pass:
    """A policy's "go ahead"."""


@dataclass(frozen=True)
class Block:
    """A policy's "no". ``message`` is shown to the user (a blocked request) or read by the
    model (a blocked tool call): say what was refused and what to do, not what the prompt held.
    ``metadata`` goes with the ``policy_blocked`` event, filtered (see :func:`safe_metadata`)."""

    message: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)


PolicyDecision: TypeAlias = Pass | Block


@dataclass(frozen=True)
class Policy:
    """A policy as the hooks hold it: the function, and its timeout (``None``: the
    :class:`~.hooks.Hooks`' ``policy_timeout``)."""

    fn: Callable[..., Any]
    timeout: float | None = None

    @property
    def name(self) -> str:
        return getattr(self.fn, "__qualname__", None) or type(self.fn).__name__


@dataclass(frozen=True)
class Blocked:
    """What a policy decided against, made safe to show: the policy's name, why it blocked
    (``block``: it said so; ``raised``, ``timeout``, ``invalid``: it failed, so it blocked), the
    message and the filtered metadata."""

    policy: str
    why: Literal["block", "raised", "timeout", "invalid"]
    message: str
    metadata: dict[str, Plain]

    def event(
        self,
        target: Literal["model_request", "tool_call"],
        *,
        call_id: str | None = None,
        tool: str | None = None,
    ) -> BlockedByPolicy:
        """The ``blocked_by_policy`` event that announces this block."""
        return BlockedByPolicy(
            target=target,
            policy=self.policy,
            why=self.why,
            message=self.message,
            metadata=self.metadata,
            call_id=call_id,
            tool=tool,
        )

    @property
    def hint(self) -> str:
        """What the author of the policy can do, when the policy failed rather than decided."""
        if self.why == "block":
            return ""
        return (
            f"The policy {self.policy} must return Pass() or Block(...) within its timeout; fix it, "
            "give it more time (add it with timeout=..., or raise Hooks.policy_timeout), or remove "
            "it with hooks.remove(fn)."
        )


async def ask(policy: Policy, subject: Any, *, timeout: float) -> Blocked | None:
    """Ask ``policy`` about ``subject`` (a request or a tool call): ``None`` when it passes.

    A sync policy runs in a worker thread so that its timeout holds; one that overruns is
    abandoned there (like a tool), its answer ignored, and its thread no longer counts as a
    worker of :func:`~.workers.policy_workers`: a policy that hangs blocks its own calls, never
    the policies asked after it."""
    name = policy.name
    limit = policy.timeout if policy.timeout is not None else timeout
    try:
        if inspect.iscoroutinefunction(policy.fn):
            decision = await asyncio.wait_for(policy.fn(subject), limit)
        else:
            asked = policy_workers().run(_call, (policy.fn, subject), label=name)
            decision = await asyncio.wait_for(asked, limit)
    except asyncio.TimeoutError:
        return Blocked(name, "timeout", f"The policy {name} did not answer within {limit:g} s.", {})
    except Exception as exc:
        # The exception's text may quote the request; only its type is shown. The traceback is
        # for whoever turns on debug logging for ipyagent.policy.
        log.debug("policy %s raised", name, exc_info=True)
        return Blocked(name, "raised", f"The policy {name} failed ({type(exc).__name__}).", {})
    if isinstance(decision, Pass):
        return None
    if isinstance(decision, Block):
        message = clip(mask_secrets(str(decision.message), known_secrets()), MAX_MESSAGE_CHARS)
        message = message or f"Refused by the policy {name}."
        return Blocked(name, "block", message, safe_metadata(decision.metadata))
    return Blocked(
        name,
        "invalid",
        f"The policy {name} returned {type(decision).__name__}, not Pass() or Block(...).",
        {},
    )


def _call(fn: Callable[..., Any], subject: Any) -> Any:
    result = fn(subject)
    if inspect.isawaitable(result):  # a sync function that returned a coroutine
        return asyncio.run(_await(result))
    return result


async def _await(awaitable: Any) -> Any:
    return await awaitable


def safe_metadata(metadata: Any) -> dict[str, Plain]:
    """``metadata`` fit to show: plain values only (others are dropped), sensitive keys'
    values redacted, strings masked of secrets and clipped, at most 20 entries."""
    if not isinstance(metadata, Mapping):
        return {}
    secrets = known_secrets()
    safe: dict[str, Plain] = {}
    for key, value in list(metadata.items())[:MAX_METADATA_ITEMS]:
        name = str(key)
        if _SENSITIVE_KEY.search(name):
            safe[name] = REDACTED
        elif isinstance(value, str):
            safe[name] = clip(mask_secrets(value, secrets), MAX_METADATA_CHARS)
        elif value is None or isinstance(value, bool | int | float):
            safe[name] = value
    return safe
