"""What a run reads of its agent's configuration: one frozen value, fixed when the run starts.

The :class:`~ipyagent.agentlib.agent.Agent` builds it; a run (:mod:`.run`), a map's items
(:mod:`.maps`, :mod:`.executors`) and a sub-agent (:mod:`.delegation`) receive it. It holds no
state of a run and starts nothing.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .budget import Budget
from .hooks import Hooks
from .model import ModelSettings, Provider, ToolChoice
from .output import OutputSpec
from .plugins import Plugin
from .retry import RetryPolicy
from .tool_choice import ToolChoicePolicy, call_named_tools
from .tool_sources import ToolSource
from .tools import Tool

__all__ = ["RunConfig"]


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    """What a run reads of the agent's configuration, fixed when the run starts (the defaults
    are :class:`~ipyagent.agentlib.agent.Agent`'s)."""

    provider: Provider
    #: The model of side calls (compaction's summaries, plugins' requests); None: ``provider``.
    utility: Provider | None = None
    #: The system prompt, built once for the run's tools.
    system: str
    tools: tuple[Tool, ...] = ()
    #: The model as the agent names it (``None`` when it picked the default): the session records it.
    model: str | None = None
    settings: ModelSettings = field(default_factory=ModelSettings)
    #: The agent's hooks, shared: a hook added during a run applies from its next call.
    hooks: Hooks = field(default_factory=Hooks)
    #: Mask secrets in every request before the policies and the model see it (see
    #: :mod:`~ipyagent.agentlib.request_redaction`).
    redact_requests: bool = True
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    max_turns: int = 50
    max_repeated_calls: int = 3
    max_consecutive_failures: int = 5
    max_result_chars: int = 30_000
    tool_timeout: float = 120.0
    can_write: bool = True
    auto_approve: bool = False
    compact_threshold: float | None = 0.85
    compact_keep: int = 6
    #: Which tools each request may call: a fixed choice, or a policy asked before each request.
    tool_choice: ToolChoice | ToolChoicePolicy = call_named_tools
    #: Caps on what this run may spend, and on the conversation's total (see budget.py).
    budget: Budget | None = None
    conversation_budget: Budget | None = None
    #: Where more tools come from as the run starts (MCP servers); the system prompt for them.
    tool_sources: tuple[ToolSource, ...] = ()
    system_for: Callable[[Sequence[Tool]], str] | None = None
    #: The typed answer the run ends with (see output.py), and how often an invalid one is
    #: answered with its problems before the run fails.
    output: OutputSpec | None = None
    output_retries: int = 2
    #: How many delegations deep this run is: 0 for an agent's own run, 1 for its sub-agent's.
    depth: int = 0
    #: Called as the run starts, after each model turn and at its end (see plugins.py).
    plugins: tuple[Plugin, ...] = ()

    @property
    def utility_provider(self) -> Provider:
        """The provider side calls go to: ``utility``, else the run's own."""
        return self.utility if self.utility is not None else self.provider

    @functools.cached_property
    def prompt_text(self) -> str:
        """What every request sends before the transcript — the system prompt, the typed
        answer's instructions, the tool schemas — as one text, to estimate its tokens. Made once
        per configuration (a run's changes make another): it is asked before every request."""
        output = self.output.instructions if self.output else ""
        schemas = "".join(json.dumps(t.spec.parameters) + t.spec.description for t in self.tools)
        return self.system + output + schemas
