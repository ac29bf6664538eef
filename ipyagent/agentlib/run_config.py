"""What a run reads of its agent's configuration: one frozen value, fixed when the run starts.

The :class:`~ipyagent.agentlib.agent.Agent` builds it; a run (:mod:`.run`), a map's items
(:mod:`.maps`, :mod:`.executors`) and a sub-agent (:mod:`.delegation`) receive it. It holds no
state of a run and starts nothing. :func:`check_run_options` refuses the limits a run cannot
work with, as the agent is given them.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .budget import Budget
from .errors import UserError
from .hooks import Hooks
from .model import ModelSettings, Provider, ToolChoice
from .output import OutputSpec
from .plugins import Plugin
from .retry import RetryPolicy
from .tool_choice import ToolChoicePolicy, call_named_tools
from .tool_sources import ToolSource
from .tools import Tool

__all__ = ["RunConfig", "check_run_options"]


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
    #: Before the run completes, ask the model once to compute the numbers of its answer that
    #: no tool output shows, or to correct them (see claims.py).
    verify: bool = False

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


def check_run_options(
    *, max_turns: int = 1, compact_threshold: float | None = None, output_retries: int = 0
) -> None:
    """Raise a :class:`UserError` that names the fix for a limit a run cannot work with (the
    defaults pass: check only what was given)."""
    if max_turns < 1:
        hint = "Pass e.g. max_turns=50."
        raise UserError("max_turns must be at least 1.", hint=hint, code="invalid_option")
    if compact_threshold is not None and not 0 < compact_threshold <= 1:
        raise UserError(
            f"compact_threshold must be between 0 and 1, not {compact_threshold}.",
            hint="Pass e.g. compact_threshold=0.85, or None to compact only on overflow.",
            code="invalid_option",
        )
    if output_retries < 0:
        raise UserError(
            f"output_retries must be 0 or more, not {output_retries}.",
            hint="Pass e.g. output_retries=2.",
            code="invalid_option",
        )
