"""What a run lends the tool call that starts a sub-agent.

A ``delegate`` call (:mod:`~ipyagent.agentlib.delegation`) builds a child run from its parent's:
its configuration, the channels its person reaches it through (the bus, the pending answers,
the tools allowed "always"), the tool-call ids a child must not reuse, and where the parent's
conversation is saved. The child changes three things of its parent, through what is lent
here and nothing else: the usage the parent counts (its budget, its conversation, its usage
events), the token ledger it draws on with its parent and its siblings, and the record of the
child in the parent's session.
"""

from __future__ import annotations

from collections.abc import Callable, Container
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .asks import PendingAnswers
    from .budget import Budget, TokenLedger
    from .bus import EventBus
    from .run import AgentRun
    from .run_config import RunConfig
    from .sessions import Session
    from .usage import Usage

__all__ = ["ParentRun", "either"]


@dataclass(frozen=True)
class ParentRun:
    """What the run lends its tool call ``call_id`` to start a sub-agent with."""

    call_id: str
    #: The run's configuration as of this turn (the tool sources' tools included).
    config: RunConfig
    #: The run's bus: a child's bus is ``bus.nested(call_id)``.
    bus: EventBus
    #: Where answers to the run's questions arrive, the child's included.
    answers: PendingAnswers
    #: Tools the user allowed for the rest of the conversation (shared: "Always" is the user's word).
    always_allowed: set[str]
    #: The tool-call ids the run may not reuse: a child's must differ from them too.
    call_ids: Container[str]
    #: The session the run's conversation is saved in (a child's file goes beside it).
    session: Session | None
    #: What is left of the run's budget (``None``: uncapped), or why nothing is.
    budget_left: Callable[[], Budget | str | None]
    #: The run's token budget, which a child draws on as it spends (``None``: no token cap).
    ledger: TokenLedger | None
    #: Count a child's usage as the run's.
    count_usage: Callable[[Usage], None]
    #: Record in the run's session that this call's child is saved in a session.
    record_child: Callable[[Session], None]

    @classmethod
    def of(cls, run: AgentRun, call_id: str) -> ParentRun:
        """What ``run`` lends its call ``call_id``."""
        conversation = run.conversation

        def budget_left() -> Budget | str | None:
            spending, usage = run.spending, run.usage
            if spent := spending.before_request(usage, conversation.usage, 0):
                return spent
            return spending.left(usage, conversation.usage)

        return cls(
            call_id=call_id,
            config=run.config,
            bus=run.bus,
            answers=run.answers,
            always_allowed=run.always_allowed,
            call_ids=run.taken_ids,
            session=conversation.session,
            budget_left=budget_left,
            ledger=run.spending.ledger,
            count_usage=run.count_usage,
            record_child=lambda child: conversation.record_subagent(call_id, child),
        )


def either(first: Container[str], second: Container[str]) -> Container[str]:
    """A container of what either holds (read live: both may grow); ``first`` when ``second`` is empty."""
    return _Either(first, second) if second else first


class _Either:
    def __init__(self, first: Container[str], second: Container[str]) -> None:
        self.first, self.second = first, second

    def __contains__(self, item: object) -> bool:
        return item in self.first or item in self.second
