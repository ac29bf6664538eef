"""Agent plugins: what a plugin adds to a run (context for the system prompt, tools) and the
hooks it is called at (after each model turn, when the run ends).

    from ipyagent import Agent, Plugin

    class Glossary(Plugin):
        name = "glossary"

        def context(self, run):
            return "In this project, 'churn' means a customer lost within 90 days."

    agent = Agent(model=..., plugins=[Glossary()])
    agent.plugins.register(Glossary())      # the same name replaces the one registered

This module owns the seam: what a plugin is (:class:`Plugin`), the registry an agent keeps of
them by name (:class:`Plugins`; a ``%%agent`` conversation's includes the kernel's,
``ipyagent.kernel.plugins``), and calling them for the loop. The loop
(:mod:`~ipyagent.agentlib.run`) decides when: once as a run starts (context and tools), after
each model turn, and when the run has ended. A sub-agent's run and an item of ``agent.map`` call
no plugins: they are no conversation of the user's.

A plugin that raises, or returns something other than what it should, costs a ``plugin_failed``
warning that names it and what failed; the run goes on without that part. Its tools follow the
same rules as every tool: one that is not ``read_only`` asks before it runs unless the run may
change things without asking.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from .errors import UserError
from .events import AgentEvent, RunWarning
from .messages import Message
from .redact import redact_text
from .tools import Tool, as_tool

if TYPE_CHECKING:
    from .conversation import Conversation
    from .model import ModelRequest, ModelSettings, Provider
    from .result import RunResult
    from .retry import RetryPolicy
    from .run_config import RunConfig
    from .sessions import Session
    from .usage import Usage

__all__ = ["MAX_CONTEXT_CHARS", "Plugin", "PluginRun", "Plugins"]

log = logging.getLogger("ipyagent")

#: What one plugin may add to the system prompt; more is cut, with a note saying so.
MAX_CONTEXT_CHARS = 4_000


@dataclass(frozen=True)
class PluginRun:
    """What a plugin is shown of the run that calls it."""

    run_id: str
    conversation: Conversation
    config: RunConfig
    #: Model turns taken so far in this run.
    turn: int
    #: Where the run's events go (a plugin may warn: ``emit(RunWarning(...))``).
    emit: Callable[[AgentEvent], None]
    #: What a request the plugin makes goes through before it is sent (the redaction of
    #: secrets and the policies), as compaction's does.
    screen: Callable[[ModelRequest], Awaitable[ModelRequest]] | None = None

    @property
    def messages(self) -> Sequence[Message]:
        """The conversation's whole transcript so far."""
        return self.conversation.messages

    @property
    def session(self) -> Session | None:
        """The session file the conversation is saved in, if any."""
        return self.conversation.session

    @property
    def provider(self) -> Provider:
        return self.config.provider

    @property
    def utility_provider(self) -> Provider:
        """The model for a plugin's own requests (the agent's utility model): cheaper side calls."""
        return self.config.utility_provider

    @property
    def settings(self) -> ModelSettings:
        return self.config.settings

    @property
    def retry(self) -> RetryPolicy:
        return self.config.retry

    @property
    def conversation_started(self) -> float:
        """When the conversation's first message was written (now, for one not begun)."""
        messages = self.conversation.messages
        return messages[0].created if messages else time.time()

    def count_usage(self, usage: Usage, *, utility: bool = True) -> None:
        """Count what a plugin's own model request spent in the conversation's usage (and, as a
        side call, in its utility part)."""
        self.conversation.add_usage(usage, utility=utility)


class Plugin:
    """Subclass and override what the plugin does; every method is optional and may be async.

    ``name`` identifies the plugin: registering another of the same name replaces it."""

    name: str = ""

    def context(self, run: PluginRun) -> str | Awaitable[str | None] | None:
        """Text added to the run's system prompt (at most :data:`MAX_CONTEXT_CHARS`), or None."""
        return None

    def tools(self) -> Sequence[Tool | Callable[..., Any]]:
        """Tools offered to the model in each run (functions or :class:`Tool` objects)."""
        return ()

    def on_turn(self, run: PluginRun, reply: Message) -> Any:
        """Called after each model turn with the reply just committed."""
        return None

    def on_run_end(self, result: RunResult, run: PluginRun) -> Any:
        """Called once the run has ended (completed, exhausted, failed or cancelled)."""
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


class Plugins:
    """The plugins of an agent (``agent.plugins``), by name; ``include`` are registries whose
    plugins come first (a ``%%agent`` conversation's include the kernel's), unless one of these
    has the same name."""

    def __init__(self, plugins: Iterable[Plugin] = (), *, include: Sequence[Plugins] = ()) -> None:
        self._plugins: dict[str, Plugin] = {}
        self.include = list(include)
        for plugin in plugins:
            self.register(plugin)

    def register(self, plugin: Plugin) -> Plugin:
        """Add ``plugin``; one registered under the same name is replaced."""
        name = getattr(plugin, "name", "")
        if not isinstance(name, str) or not name:
            raise UserError(
                f"{plugin!r} has no name.",
                hint="Give the plugin class a name: class MyPlugin(Plugin): name = 'my_plugin'.",
                code="invalid_plugin",
            )
        self._plugins[name] = plugin
        return plugin

    def remove(self, name: str) -> Plugin | None:
        """Unregister the plugin called ``name`` (here, not in an included registry)."""
        return self._plugins.pop(name, None)

    def get(self, name: str) -> Plugin | None:
        """The plugin a run would use under ``name`` (these first, then the included ones')."""
        return next((p for p in reversed(self.active()) if p.name == name), None)

    def active(self) -> tuple[Plugin, ...]:
        """The plugins a run calls, in order: the included registries', then these; one name once
        (these win)."""
        merged: dict[str, Plugin] = {}
        for registry in self.include:
            merged.update((p.name, p) for p in registry.active())
        for name, plugin in self._plugins.items():
            merged.pop(name, None)
            merged[name] = plugin
        return tuple(merged.values())

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.active()]

    def __contains__(self, name: object) -> bool:
        return any(p.name == name for p in self.active())

    def __iter__(self) -> Iterator[Plugin]:
        return iter(self.active())

    def __len__(self) -> int:
        return len(self.active())

    def __repr__(self) -> str:
        return f"Plugins({self.names})"

    @classmethod
    def of(cls, value: Plugins | Iterable[Plugin] | None) -> Plugins:
        """``value`` itself when it is a registry, else a registry of its plugins."""
        return value if isinstance(value, Plugins) else cls(value or ())


# -- called by the loop ---------------------------------------------------------------------------


async def start_plugins(run: PluginRun) -> RunConfig:
    """The run's configuration with its plugins' context in the system prompt and their tools
    among its own (a tool named like one the run has is left out, with a warning)."""
    config = run.config
    contexts: list[str] = []
    tools = list(config.tools)
    for plugin in config.plugins:
        ok, text = await _call(run, plugin, "context", run)
        if ok and text is not None and not isinstance(text, str):
            _warn(run, plugin, "context", f"it returned {type(text).__name__}, not text")
        elif ok and text and text.strip():
            contexts.append(_bounded(text.strip()))
        ok, offered = await _call(run, plugin, "tools")
        try:
            built = [as_tool(t) for t in offered or ()] if ok else []
        except Exception as exc:
            _warn(run, plugin, "tools", f"{type(exc).__name__}: {exc}")
            built = []
        for t in built:
            if any(t.name == known.name for known in tools):
                _warn(run, plugin, "tools", f"its tool `{t.name}` is named like one the run has: left out")
            else:
                tools.append(t)
    system = "\n\n".join([config.system, *contexts]) if contexts else config.system
    return replace(config, system=system, tools=tuple(tools))


async def plugins_on_turn(run: PluginRun, reply: Message) -> None:
    """Call each plugin's :meth:`Plugin.on_turn`."""
    for plugin in run.config.plugins:
        await _call(run, plugin, "on_turn", run, reply)


async def plugins_on_run_end(run: PluginRun, result: RunResult) -> None:
    """Call each plugin's :meth:`Plugin.on_run_end`. The run is over: a cancellation that lands
    now stops what the plugins do (with a warning), not the run, whose result stands."""
    for plugin in run.config.plugins:
        try:
            await _call(run, plugin, "on_run_end", result, run)
        except asyncio.CancelledError:
            _warn(run, plugin, "on_run_end", "it was cancelled before it finished")
            return


async def _call(run: PluginRun, plugin: Plugin, what: str, *args: Any) -> Any:
    """``(True, value)`` of the plugin's method ``what`` called with ``args``, awaited when it
    returns an awaitable; ``(True, None)`` when it has no such method (each is optional);
    ``(False, None)`` and a warning when it raises."""
    fn = getattr(plugin, what, None)
    if fn is None:
        return True, None
    try:
        value = fn(*args)
        if inspect.isawaitable(value):
            value = await value
    except Exception as exc:
        log.warning("ipyagent: plugin %s raised in %s", _name(plugin), what, exc_info=True)
        _warn(run, plugin, what, f"{type(exc).__name__}: {exc}")
        return False, None
    return True, value


def _warn(run: PluginRun, plugin: Plugin, what: str, problem: str) -> None:
    run.emit(
        RunWarning(
            code="plugin_failed",
            message=redact_text(f"The plugin {_name(plugin)!r} failed in {what}(): {problem}."),
            hint="The run went on without it; fix the plugin, or unregister it with "
            f"agent.plugins.remove({_name(plugin)!r}).",
        )
    )


def _name(plugin: Plugin) -> str:
    return getattr(plugin, "name", "") or type(plugin).__name__


def _bounded(text: str) -> str:
    if len(text) <= MAX_CONTEXT_CHARS:
        return text
    return f"{text[:MAX_CONTEXT_CHARS]}\n… [cut: {MAX_CONTEXT_CHARS:,} of {len(text):,} characters]"
