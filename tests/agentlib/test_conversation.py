"""The run and its state without an Agent: a Conversation, a RunConfig, a scripted model.

The conversation owns the transcript, its usage, its context readout and its session file; a
run and a compaction are handed it and change it only through its methods. These tests build
those pieces by hand, the way the Agent does, and drive them.
"""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path
from typing import Any

import pytest
from helpers import assert_valid_transcript

from ipyagent import Agent, RetryPolicy, tool
from ipyagent.agentlib.asks import Inbox, PendingAnswers
from ipyagent.agentlib.bus import EventBus
from ipyagent.agentlib.compaction import SUMMARY_PREFIX, compact
from ipyagent.agentlib.conversation import Conversation
from ipyagent.agentlib.errors import ContextOverflowError, ProviderUnavailable, RateLimitError, RunError
from ipyagent.agentlib.events import AgentEvent, PermissionRequired
from ipyagent.agentlib.messages import Message, TextBlock
from ipyagent.agentlib.retry import Retries
from ipyagent.agentlib.run import AgentRun
from ipyagent.agentlib.run_config import RunConfig
from ipyagent.agentlib.sessions import Session, read_session
from ipyagent.agentlib.tools import as_tool
from ipyagent.testing import ScriptedModel, error, tool_call, usage

FAST = RetryPolicy(attempts=3, base_delay=0.001, max_delay=0.001)


@tool(read_only=True)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def delete(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


def wired(**session: Any) -> tuple[EventBus, list[AgentEvent], Conversation]:
    bus = EventBus()
    events: list[AgentEvent] = []
    bus.on("*", events.append)
    return bus, events, Conversation(emit=bus.emit, **session)


async def test_a_run_needs_no_agent_only_a_conversation_a_config_and_a_model() -> None:
    bus, events, conversation = wired()
    model = ScriptedModel([[tool_call("add", {"a": 2, "b": 3}), usage(input_tokens=40)], "5", "Still 5."])
    config = RunConfig(provider=model, system="You add numbers.", tools=(as_tool(add),))

    first = await AgentRun(conversation, config, "2 + 3?", bus=bus).execute()

    assert first.status == "completed" and first.text == "5"
    assert list(conversation.messages) == first.messages
    assert [m.role for m in conversation.messages] == ["user", "assistant", "user", "assistant"]
    assert conversation.usage == first.usage and first.usage.requests == 2
    assert model.requests[0].system == "You add numbers."
    assert [t.name for t in model.requests[0].tools] == ["add"]
    assert events[0].type == "run_started" and events[-1].type == "run_finished"
    # A second run continues the same conversation.
    second = await AgentRun(conversation, config, "And now?", bus=bus).execute()
    assert second.text == "Still 5." and len(second.messages) == 2
    assert [m.text for m in model.requests[2].messages][-2:] == ["5", "And now?"]
    assert_valid_transcript(list(conversation.messages))


async def test_input_sent_before_the_run_takes_it_joins_the_prompt() -> None:
    bus, _, conversation = wired()
    inbox = Inbox()
    inbox.put("Use metric units.")
    config = RunConfig(provider=ScriptedModel(["ok"]), system="")
    await AgentRun(conversation, config, "Convert 3 miles.", bus=bus, inbox=inbox).execute()
    assert conversation.messages[0].text == "Convert 3 miles.\n\nUse metric units."
    assert inbox.take() == ""


async def test_an_always_answer_is_remembered_in_the_set_the_run_was_given() -> None:
    bus, _, conversation = wired()
    answers = PendingAnswers()
    always: set[str] = set()

    def answer(event: PermissionRequired) -> None:
        answers.resolve(f"permission:{event.call_id}", ("always", ""))

    bus.on("permission_required", answer)
    model = ScriptedModel([tool_call("delete", {"path": "a"}), "done"])
    config = RunConfig(provider=model, system="", tools=(as_tool(delete),))
    await AgentRun(conversation, config, "rm a", bus=bus, answers=answers, always_allowed=always).execute()
    assert always == {"delete"}
    assert conversation.messages[2].tool_results[0].content == "deleted a"


async def test_an_overflow_is_compacted_by_the_conversation_and_the_turn_sent_again() -> None:
    bus, events, conversation = wired()
    for n in range(6):
        conversation.append(Message.user(f"question {n}"))
        conversation.append(Message(role="assistant", content=(TextBlock(text=f"answer {n}"),)))
    model = ScriptedModel([error(ContextOverflowError("too long")), "A summary.", "answer"])
    config = RunConfig(provider=model, system="", compact_keep=2, compact_threshold=None)

    result = await AgentRun(conversation, config, "next", bus=bus).execute()

    assert result.text == "answer"
    assert conversation.messages[0].text.startswith(SUMMARY_PREFIX)
    assert [m.text for m in conversation.messages[1:]] == ["answer 5", "next", "answer"]
    types = [e.type for e in events]
    compaction = types.index("compaction_started"), types.index("compaction_completed")
    assert compaction[0] < compaction[1] < types.index("run_finished")
    assert conversation.usage.requests == 2  # the summary's request and the answer's
    assert result.usage.requests == 2


async def test_a_compaction_is_applied_by_the_conversation_and_recorded(tmp_path: Path) -> None:
    with Session.open(tmp_path / "s.agent.jsonl") as session:
        _, _, conversation = wired(session=session)
        for n in range(5):
            conversation.append(Message.user(f"m{n}"))
        decided = await compact(conversation.messages, ScriptedModel(["gist"]), keep=2)
        before = list(conversation.messages)
        conversation.apply_compaction(decided, reason="manual")
        assert list(conversation.messages) == [decided.summary, *before[3:]]
        assert conversation.context is None
        assert conversation.usage.requests == 1
    state = read_session(tmp_path / "s.agent.jsonl")
    assert state.messages == list(conversation.messages) and state.compactions == 1
    assert state.usage.requests == 1


# -- the one retry helper ------------------------------------------------------------------------


class Clock:
    """A provider stand-in that records the waits instead of sleeping."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def wait_before_retry(self, seconds: float) -> None:
        self.waits.append(seconds)


async def test_retries_wait_as_the_policy_says_and_give_up_after_its_attempts() -> None:
    clock = Clock()
    tries: list[int] = []

    async def always_busy(attempt: int) -> str:
        tries.append(attempt)
        raise RateLimitError("slow down", retry_after=2.0)

    with pytest.raises(RateLimitError):
        await Retries(FAST, clock).run(always_busy)
    # Retry-After wins over the backoff, capped at four times the policy's longest delay.
    assert tries == [1, 2, 3] and clock.waits == [FAST.max_delay * 4] * 2


async def test_retries_do_not_retry_what_is_not_retryable_and_let_on_error_retry_at_once() -> None:
    clock = Clock()
    told: list[tuple[str, int, float | None]] = []

    async def on_error(exc: Any, attempt: int, delay: float | None) -> bool:
        told.append((type(exc).__name__, attempt, delay))
        return isinstance(exc, ContextOverflowError)  # handled: send again without waiting

    script = [ContextOverflowError("too long"), ProviderUnavailable("busy"), None]

    async def send(attempt: int) -> str:
        if (failure := script[attempt - 1]) is not None:
            raise failure
        return "ok"

    retries = Retries(FAST, clock)
    assert await retries.run(send, on_error=on_error) == "ok"
    assert [(name, attempt) for name, attempt, _ in told] == [
        ("ContextOverflowError", 1),
        ("ProviderUnavailable", 2),
    ]
    assert len(clock.waits) == 1  # only the retryable error waited
    # The numbering goes on across calls; a non-retryable error propagates at once.

    async def broken(attempt: int) -> str:
        raise RunError("no", code="bad")

    with pytest.raises(RunError):
        await retries.run(broken)
    assert retries.attempt == 4


def test_a_run_configs_defaults_are_the_agents() -> None:
    agent_defaults = {
        name: p.default for name, p in inspect.signature(Agent.__init__).parameters.items() if name != "self"
    }
    shared = [f for f in dataclasses.fields(RunConfig) if f.name in agent_defaults]
    assert len(shared) >= 10
    for f in shared:
        default = f.default if f.default is not dataclasses.MISSING else None
        if agent_defaults[f.name] is None and f.default_factory is not dataclasses.MISSING:
            continue  # the agent builds the default (RetryPolicy(), Hooks()) when given None
        if f.name == "redact_requests":  # None: the config file's choice, itself on by default
            assert (agent_defaults[f.name], default) == (None, True)
            continue
        assert default == agent_defaults[f.name], f.name


async def test_images_are_looked_for_once_per_message_not_per_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ipyagent.agentlib import conversation as conversation_module

    looked: list[int] = []
    real = conversation_module.holds_images

    def counting(message: Message) -> bool:
        looked.append(1)
        return real(message)

    monkeypatch.setattr(conversation_module, "holds_images", counting)

    @tool(read_only=True)
    def noop(i: int) -> str:
        """Nothing."""
        return "ok"

    rounds = 30
    agent = Agent(
        model=ScriptedModel([tool_call("noop", {"i": i}) for i in range(rounds)] + ["done"]), tools=[noop]
    )
    await agent.run("go")
    assert len(looked) == len(agent.messages)  # each message once, as it was committed
