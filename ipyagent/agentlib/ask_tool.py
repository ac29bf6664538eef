"""``ask_user``: the tool that lets the model ask the person at the keyboard.

Offered where someone can answer (the kernel offers it to a ``%%agent`` cell shown in a front
end and to the chat, not to a headless run). The question and its choices appear in the run
view, with a box for a typed answer and Skip. When nobody answers — the view never showed, or
the user skipped — the model is told at once that no one is here, and decides for itself.
"""

from __future__ import annotations

from .tools import RunContext, Tool, tool

__all__ = ["NO_ANSWER", "ask_user_tool"]

NO_ANSWER = (
    "No one is here to answer (the run has no one at the keyboard, or the user skipped the "
    "question). Decide for yourself and say what you assumed, or say in your answer what you need."
)

#: An hour: a person may step away; Stop ends the wait at once.
_WAIT = 3600.0


async def ask_user(question: str, choices: list[str] | None = None, *, ctx: RunContext) -> str:
    """Ask the user a question when you cannot go on well without their answer: which of several
    approaches, a value only they know, a file or column name you could not find. Do not ask what
    you can find out with your other tools. Offer a few short choices when the likely answers are
    clear; the user may also type their own.

    Args:
        question: The question, in a sentence or two.
        choices: A few short answers the user can pick (optional).
    """
    answer = await ctx.ask_user(question, [c for c in choices or [] if c.strip()])
    return NO_ANSWER if answer is None or not answer.strip() else answer


def ask_user_tool() -> Tool:
    """The ``ask_user`` tool (read-only: asking changes nothing)."""
    return tool(ask_user, read_only=True, timeout=_WAIT)
