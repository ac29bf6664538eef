"""The kernel's plugins: which ones a ``%%agent`` run uses (``--plugins memory,summaries``,
``c.AgentMagics.plugins``), and ``%agent memory`` / ``%agent summaries``, where the user reads
and deletes what they keep.

The built-in plugins are made once per kernel (:meth:`KernelState.plugin`): the notes of
``memory`` are the notebook folder's ``.ipyagent/memory/``, the ``summaries`` are the notebook's
``<notebook>.summaries.jsonl`` beside its conversations. While a cassette records or replays,
neither joins a run: what they add to the prompt comes from files beside the notebook, which a
recording must not depend on to replay elsewhere.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .user_error import user_error

if TYPE_CHECKING:
    from ..agentlib.agent import Agent
    from .state import KernelState

__all__ = ["BUILT_IN", "configure_plugins", "memory_command", "plugin_names", "summaries_command"]

BUILT_IN = ("memory", "summaries")
MEMORY_USAGE = "%agent memory [list] | show TITLE | forget TITLE"
SUMMARIES_USAGE = "%agent summaries [list] | clear"


def plugin_names(requested: str | None, configured: Sequence[str]) -> list[str]:
    """The built-in plugins a run uses: ``--plugins`` (``none`` for none), else the configured."""
    names = (
        [n.strip().lower() for n in requested.split(",") if n.strip()]
        if requested is not None
        else [n.strip().lower() for n in configured if n.strip()]
    )
    names = [n for n in names if n != "none"]
    unknown = [n for n in names if n not in BUILT_IN]
    if unknown:
        raise user_error(
            f"Unknown plugin {unknown[0]!r}.",
            f"The plugins are {', '.join(BUILT_IN)} (--plugins memory,summaries, or none); register your "
            "own with ipyagent.kernel.plugins.register(...).",
            "invalid_plugin",
        )
    return names


def configure_plugins(
    agent: Agent, names: Sequence[str], state: KernelState, *, replaying: bool, session_dir: str | None
) -> None:
    """Register the named built-in plugins on the conversation's agent, and unregister the others
    (``session_dir``: where the conversations, and so the summaries, are kept)."""
    if replaying and names:
        state.say_once(
            "plugins:replay",
            f"ipyagent: the plugins {', '.join(names)} are off while a cassette records or replays "
            "(what they add comes from files beside the notebook).",
        )
    for name in BUILT_IN:
        if name in names and not replaying:
            agent.plugins.register(state.plugin(name, session_dir=session_dir))
        else:
            agent.plugins.remove(name)


def memory_command(state: KernelState, words: list[str]) -> str:
    """Do ``%agent memory <words>`` and say what happened."""
    from ..agentlib.memory import Memory

    memory = state.plugin("memory")
    assert isinstance(memory, Memory)
    words = shlex.split(" ".join(words))
    action, title = (words[0], " ".join(words[1:])) if words else ("list", "")
    if action == "list" and not title:
        notes = memory.notes()
        if not notes:
            return f"No notes in {memory.folder}. Enable the memory with %%agent --plugins memory."
        lines = [f"{len(notes)} note(s) in {memory.folder}:"]
        lines += [f"- {n.title}: {n.line}" for n in notes]
        return "\n".join(lines)
    if action in ("show", "forget") and title:
        note = memory.find(title)
        if note is None:
            raise user_error(f"There is no note {title!r}.", "See %agent memory.", "unknown_note")
        if action == "show":
            return f"# {note.title}\n\n{note.text}"
        memory.forget(title)
        return f"Deleted the note {note.title!r} ({note.path.name})."
    raise user_error(
        f"Unknown or incomplete command: %agent memory {' '.join(words)}",
        f"Use {MEMORY_USAGE}.",
        "invalid_plugin_command",
    )


def summaries_command(state: KernelState, words: list[str], *, session_dir: str | None) -> str:
    """Do ``%agent summaries <words>`` and say what happened."""
    from ..agentlib.summaries import Summaries

    summaries = state.plugin("summaries", session_dir=session_dir)
    assert isinstance(summaries, Summaries)
    action = words[0] if words else "list"
    if action == "list" and len(words) <= 1:
        records = summaries.records()
        if not records:
            return f"No summaries in {summaries.path}. Enable them with %%agent --plugins summaries."
        return "\n\n".join([f"{len(records)} summary(ies) in {summaries.path}:", *map(str, records)])
    if action == "clear" and len(words) == 1:
        count = summaries.clear()
        return f"Deleted {count} summary(ies) ({summaries.path})."
    raise user_error(
        f"Unknown or incomplete command: %agent summaries {' '.join(words)}",
        f"Use {SUMMARIES_USAGE}.",
        "invalid_plugin_command",
    )
