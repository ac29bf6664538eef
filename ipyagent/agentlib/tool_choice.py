"""Which tools a model request may call: the loop's tool-choice policy.

Every :class:`~ipyagent.agentlib.model.ModelRequest` carries a ``tool_choice``: ``"auto"`` (the
model decides), ``"none"`` (answer in text), ``"required"`` (call one or more tools) or a tuple of
tool names (call one or more of those). It is decided here and in the loop, never by a provider;
adapters only map it to their API (or say what they cannot enforce).

Who decides, in order, for each request of a run:

1. The run's choice: ``agent.run(prompt, tool_choice=...)``, else ``Agent(tool_choice=...)``,
   else the default policy, :func:`call_named_tools`.
2. A before-model hook (``agent.hooks.before_model_call``) sees the request with that choice and
   may return a copy with another one: ``request.model_copy(update={"tool_choice": "none"})``.

A fixed choice (``"none"``, ``"required"``, names) holds for the requests of a run until the model
has called a tool; the requests after that are ``"auto"``, so that the model can answer with the
results (a ``"required"`` that held on would make it call tools until ``max_turns``). A policy —
any callable ``policy(messages, tools) -> ToolChoice`` — is asked before every request instead,
with the run's messages so far (its prompt first) and the tools offered.

The default policy, :func:`call_named_tools`: when the user's message tells the model to call a
tool by name — "call describe_variable ...", "use `run_python` to ...", not negated ("don't call
X", "without using X") — the request that answers that message must call (one of) the tools
named. Small models answer such a message from memory more often than not (asked to "call
describe_variable", Qwen2.5-Coder-1.5B described the variable from memory in most tries); with the
call required they make it reliably, and a large model loses nothing by being held to what it
was told. ``Agent(tool_choice="auto")`` switches the policy off.

A softer hint goes with ``"auto"``: when the user's message names an offered tool without telling
the model to call it ("is `get_weather` right for Oslo?"), the request's ``expects_tool_call`` is
set (:func:`expects_tool_call`). It constrains nothing; the local model leans its first token
toward a call, other providers ignore it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

from .errors import UserError
from .messages import Message
from .model import ToolChoice, ToolSpec

__all__ = [
    "ToolChoicePolicy",
    "call_named_tools",
    "check_tool_choice",
    "choose",
    "expects_tool_call",
    "mentions_tool",
    "named_calls",
]

#: Asked before every request of a run: ``policy(run_messages, tools) -> ToolChoice``.
ToolChoicePolicy: TypeAlias = Callable[[Sequence[Message], Sequence[ToolSpec]], ToolChoice]

_MODES = ("auto", "none", "required")

# "Call describe_variable ...", "use `run_python` to ...": an instruction to call a tool by name.
_CALL_VERB = r"(?:call|use|run|invoke|calling|using|running)\s+(?:the\s+)?(?:tool\s+|function\s+)?`?"
# "don't call X", "without using X", "no need to run X": not an instruction to call it.
_NEGATION = re.compile(r"(?:\b(?:not|never|without|no|nor|avoid|instead\s+of)|n't)(?:\s+\w+){0,2}\s+$", re.I)


def named_calls(text: str, tools: Sequence[ToolSpec]) -> list[str]:
    """The names of the tools among ``tools`` that ``text`` tells the model to call ("Call
    describe_variable with name 'sales'", "use `run_python` to ..."), unless the instruction is
    negated ("don't call ...", "without using ..."). A name mentioned without a verb ("what does
    get_weather return?") is not an instruction."""
    named = []
    for tool in tools:
        pattern = rf"(?<![\w-]){_CALL_VERB}{re.escape(tool.name)}(?![\w-])"
        for match in re.finditer(pattern, text, re.IGNORECASE):
            if not _NEGATION.search(text[: match.start()]):
                named.append(tool.name)
                break
    return named


def call_named_tools(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ToolChoice:
    """The default policy: the tools the user's last message tells the model to call by name,
    when the next request answers that message; ``"auto"`` otherwise (after tool results, or
    when no tool is named)."""
    last = messages[-1] if messages else None
    if last is None or last.role != "user" or last.tool_results:
        return "auto"
    named = named_calls(last.text, tools)
    return tuple(named) if named else "auto"


def mentions_tool(text: str, tools: Sequence[ToolSpec]) -> bool:
    """Whether ``text`` names one of ``tools`` as a whole word ("get_weather", not
    "get_weather_now"), whatever it says about it."""
    return any(re.search(rf"(?<![\w-]){re.escape(t.name)}(?![\w-])", text) for t in tools)


def expects_tool_call(choice: ToolChoice, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> bool:
    """The request's ``expects_tool_call``: under ``"auto"``, the next request answers the user's
    own message (not tool results) and that message names an offered tool. A tool mentioned in
    passing is a good sign that a call is wanted; on every turn the lean made the local model
    call a tool for "In Python, which keyword defines a function?"."""
    last = messages[-1] if messages else None
    if choice != "auto" or last is None or last.role != "user" or last.tool_results:
        return False
    return mentions_tool(last.text, tools)


def check_tool_choice(value: Any) -> ToolChoice | ToolChoicePolicy:
    """``value`` as a tool choice or policy (a list of names becomes a tuple), or a
    :class:`UserError` that says what is accepted."""
    if callable(value):
        return value  # type: ignore[no-any-return]
    if isinstance(value, str):
        if value in _MODES:
            return value  # type: ignore[return-value]
    elif isinstance(value, list | tuple) and value and all(isinstance(v, str) and v for v in value):
        return tuple(value)
    raise UserError(
        f"Invalid tool_choice {value!r}.",
        hint="Use 'auto', 'none', 'required', a list of tool names, or a function "
        "(messages, tools) -> one of those.",
        code="invalid_option",
    )


def choose(
    choice: ToolChoice | ToolChoicePolicy, messages: Sequence[Message], tools: Sequence[ToolSpec]
) -> ToolChoice:
    """The ``tool_choice`` of the next request of a run: ``messages`` are the run's messages so
    far (its prompt first), ``tools`` the tools it offers. See the module docstring for the rules."""
    if callable(choice):
        decided = check_tool_choice(choice(messages, tools))
        if callable(decided):
            raise UserError(
                f"The tool_choice policy {choice!r} returned a function, not a choice.",
                hint="Return 'auto', 'none', 'required' or a tuple of tool names.",
                code="invalid_option",
            )
    elif any(m.tool_calls for m in messages):
        return "auto"  # a fixed choice holds until the model has called a tool
    else:
        decided = choice
    if decided == "required" and not tools:
        raise UserError(
            "tool_choice='required', but this run offers no tools.",
            hint="Give the agent tools, or use tool_choice='auto'.",
            code="invalid_option",
        )
    if isinstance(decided, tuple):
        offered = {t.name for t in tools}
        unknown = [name for name in decided if name not in offered]
        if unknown:
            raise UserError(
                f"tool_choice names {', '.join(map(repr, unknown))}, which this run does not offer.",
                hint=f"Name some of: {', '.join(sorted(offered)) or '(no tools)'}.",
                code="invalid_option",
            )
    return decided
