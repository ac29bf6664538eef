"""``ask_user``: the tool that lets the model ask the person at the keyboard.

Offered where someone can answer (the kernel offers it to a ``%%agent`` cell shown in a front
end and to the chat, not to a headless run). The question and its choices appear in the run
view, with a box for a typed answer and Skip. When nobody answers — the view never showed, or
the user skipped — the model is told at once that no one is here, and decides for itself.

A question has limits (:data:`MAX_CHOICES` choices of at most :data:`MAX_CHOICE_CHARS`
characters, a question of at most :data:`MAX_QUESTION_CHARS`), checked here before anything is
asked: the question goes to the view whole, as an event, a block of its state and the widget's
comm traffic, and stays in the saved notebook (10,000 choices made a 1.9 MB question). A
question over a limit is not shown cut down — a list cut at 20 of 10,000 would hide the likely
answer as often as not — it is refused with an error result that says which limit and what to
do (offer the few likeliest choices: the user can always type another answer), and the model
asks again. Every question a tool asks through :meth:`RunContext.ask_user` is the tool's own
text; only this tool asks what a model wrote.
"""

from __future__ import annotations

from .tools import RunContext, Tool, ToolOutput, tool

__all__ = ["MAX_CHOICES", "MAX_CHOICE_CHARS", "MAX_QUESTION_CHARS", "NO_ANSWER", "ask_user_tool"]

#: One button per choice: twenty short labels fill a few rows of a cell; a longer list is one the
#: user searches, and is better typed into the answer box, which every question has.
MAX_CHOICES = 20
#: About two lines of a button.
MAX_CHOICE_CHARS = 200
#: "A sentence or two", with room for the context a good question gives.
MAX_QUESTION_CHARS = 2_000

NO_ANSWER = (
    "No one is here to answer (the run has no one at the keyboard, or the user skipped the "
    "question). Decide for yourself and say what you assumed, or say in your answer what you need."
)

#: An hour: a person may step away; Stop ends the wait at once.
_WAIT = 3600.0


async def ask_user(question: str, choices: list[str] | None = None, *, ctx: RunContext) -> str | ToolOutput:
    """Ask the user a question when you cannot go on well without their answer: which of several
    approaches, a value only they know, a file or column name you could not find. Do not ask what
    you can find out with your other tools. Offer a few short choices when the likely answers are
    clear; the user may also type their own.

    Args:
        question: The question, in a sentence or two (at most 2,000 characters).
        choices: A few short answers the user can pick (optional; at most 20, each at most 200
            characters).
    """
    offered = [c for c in choices or [] if c.strip()]
    problem = _over_limits(question, offered)
    if problem:
        return ToolOutput(text=problem, is_error=True)
    answer = await ctx.ask_user(question, offered)
    return NO_ANSWER if answer is None or not answer.strip() else answer


def _over_limits(question: str, choices: list[str]) -> str:
    """Why the question cannot be asked as it is ("" when it can), written for the model."""
    again = (
        "Nothing was asked. Ask again with the few likeliest answers as choices: the user can always "
        "type another one."
    )
    if len(question) > MAX_QUESTION_CHARS:
        return (
            f"The question is {len(question):,} characters; ask_user takes at most "
            f"{MAX_QUESTION_CHARS:,} characters. Nothing was asked. Ask it in a sentence or two; put "
            "long material in a file or a cell and refer to it."
        )
    if len(choices) > MAX_CHOICES:
        return (
            f"You gave {len(choices):,} choices; ask_user takes at most {MAX_CHOICES} choices. {again} "
            "Or narrow the question down first (by a pattern, a folder, a range) with your other tools."
        )
    for number, choice in enumerate(choices, 1):
        if len(choice) > MAX_CHOICE_CHARS:
            return (
                f"choice {number} is {len(choice):,} characters; each choice may have at most "
                f"{MAX_CHOICE_CHARS} characters. Nothing was asked. Make the choices short labels, and "
                "put any detail in the question."
            )
    return ""


def ask_user_tool() -> Tool:
    """The ``ask_user`` tool (read-only: asking changes nothing)."""
    return tool(ask_user, read_only=True, timeout=_WAIT)
