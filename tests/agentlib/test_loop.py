"""The loop's rules, each driven through the public API with a scripted model."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from helpers import assert_valid_transcript

from ipyagent import Agent, RetryPolicy, tool
from ipyagent.agentlib.errors import ProviderUnavailable, RateLimitError, UserError
from ipyagent.agentlib.events import AgentEvent
from ipyagent.testing import ScriptedModel, error, text, thinking, tool_call, usage

FAST_RETRY = RetryPolicy(base_delay=0.001, max_delay=0.01)


def collect(agent: Agent) -> list[AgentEvent]:
    events: list[AgentEvent] = []
    agent.on("*", events.append)
    return events


@tool(read_only=True)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def test_a_tool_round_trip_answers_with_the_result() -> None:
    model = ScriptedModel([tool_call("add", {"a": 2, "b": 3}), "The sum is 5."])
    agent = Agent(model=model, tools=[add])
    result = await agent.run("2 + 3?")
    assert result.status == "completed"
    assert result.text == "The sum is 5."
    assert [m.role for m in result.messages] == ["user", "assistant", "user", "assistant"]
    assert result.messages[2].tool_results[0].content == "5"
    # The model's second request carried the tool result.
    assert model.requests[1].messages[-1].tool_results[0].content == "5"
    assert_valid_transcript(agent.messages)


async def test_every_call_of_a_turn_runs_read_only_concurrently() -> None:
    started: dict[str, asyncio.Event] = {"x": asyncio.Event(), "y": asyncio.Event()}

    @tool(read_only=True)
    async def probe(name: str, other: str) -> str:
        """Wait until the other probe has started too: deadlocks unless both run at once."""
        started[name].set()
        await asyncio.wait_for(started[other].wait(), 2)
        return f"{name} saw {other}"

    model = ScriptedModel(
        [
            [
                tool_call("probe", {"name": "x", "other": "y"}),
                tool_call("probe", {"name": "y", "other": "x"}),
            ],
            "ok",
        ]
    )
    result = await Agent(model=model, tools=[probe]).run("go")
    contents = [r.content for r in result.messages[2].tool_results]
    assert contents == ["x saw y", "y saw x"]


async def test_mutating_calls_run_one_at_a_time_in_order() -> None:
    log: list[str] = []

    @tool
    async def write(key: str) -> str:
        """Write a key."""
        log.append(f"start {key}")
        await asyncio.sleep(0.01)
        log.append(f"end {key}")
        return key

    calls = [tool_call("write", {"key": k}) for k in "abc"]
    result = await Agent(model=ScriptedModel([calls, "done"]), tools=[write], auto_approve=True).run("go")
    assert log == ["start a", "end a", "start b", "end b", "start c", "end c"]
    assert [r.content for r in result.messages[2].tool_results] == ["a", "b", "c"]


async def test_tool_call_ids_are_generated_when_missing_and_replaced_on_collision() -> None:
    model = ScriptedModel(
        [
            [tool_call("add", {"a": 1, "b": 1}), tool_call("add", {"a": 2, "b": 2}, id="dup")],
            [tool_call("add", {"a": 3, "b": 3}, id="dup")],
            "done",
        ]
    )
    agent = Agent(model=model, tools=[add])
    await agent.run("go")
    ids = [c.id for m in agent.messages for c in m.tool_calls]
    assert len(ids) == 3
    assert ids[0] and ids[1] == "dup"
    assert ids[2] != "dup"
    assert_valid_transcript(agent.messages)


async def test_malformed_arguments_become_an_error_result_and_the_tool_does_not_run() -> None:
    ran: list[Any] = []

    @tool(read_only=True)
    def look(q: str) -> str:
        """Look."""
        ran.append(q)
        return q

    model = ScriptedModel([tool_call("look", '{"q": "unterminated'), "sorry"])
    result = await Agent(model=model, tools=[look]).run("go")
    block = result.messages[2].tool_results[0]
    assert block.is_error
    assert '{"q": "unterminated' in block.content
    assert ran == []
    assert result.status == "completed"


async def test_unknown_tool_gets_an_error_listing_the_available_ones() -> None:
    model = ScriptedModel([tool_call("substract", {"a": 1}), "ok"])
    result = await Agent(model=model, tools=[add]).run("go")
    block = result.messages[2].tool_results[0]
    assert block.is_error
    assert "Unknown tool `substract`" in block.content
    assert "add" in block.content


async def test_a_tool_that_raises_becomes_an_error_result() -> None:
    @tool(read_only=True)
    def broken() -> str:
        """Always fails."""
        raise ValueError("disk on fire")

    result = await Agent(model=ScriptedModel([tool_call("broken"), "ok"]), tools=[broken]).run("go")
    block = result.messages[2].tool_results[0]
    assert block.is_error
    assert "ValueError" in block.content
    assert "disk on fire" in block.content
    assert result.status == "completed"


async def test_invalid_arguments_are_sent_back_to_the_model() -> None:
    model = ScriptedModel([tool_call("add", {"a": "one", "b": 2}), "ok"])
    result = await Agent(model=model, tools=[add]).run("go")
    block = result.messages[2].tool_results[0]
    assert block.is_error
    assert "a:" in block.content
    assert "integer" in block.content


async def test_a_slow_tool_times_out_into_an_error_result() -> None:
    @tool(read_only=True, timeout=0.05)
    async def slow() -> str:
        """Sleeps."""
        await asyncio.sleep(10)
        return "never"

    started = time.monotonic()
    result = await Agent(model=ScriptedModel([tool_call("slow"), "ok"]), tools=[slow]).run("go")
    assert time.monotonic() - started < 5
    block = result.messages[2].tool_results[0]
    assert block.is_error
    assert "timed out after 0.05 s" in block.content


async def test_agent_wide_tool_timeout_applies_to_sync_tools() -> None:
    @tool(read_only=True)
    def blocking() -> str:
        """Blocks a worker thread."""
        time.sleep(0.3)
        return "late"

    agent = Agent(model=ScriptedModel([tool_call("blocking"), "ok"]), tools=[blocking], tool_timeout=0.05)
    result = await agent.run("go")
    assert "timed out" in result.messages[2].tool_results[0].content


async def test_max_turns_stops_the_run_as_exhausted_with_a_valid_transcript() -> None:
    model = ScriptedModel([tool_call("add", {"a": i, "b": 0}) for i in range(5)])
    agent = Agent(model=model, tools=[add], max_turns=3)
    result = await agent.run("loop forever")
    assert result.status == "exhausted"
    assert "max_turns" in result.reason
    with pytest.warns(DeprecationWarning, match="RunResult.message is now RunResult.reason"):
        assert result.message == result.reason
    assert len(model.requests) == 3
    assert_valid_transcript(agent.messages)


async def test_the_third_identical_call_in_a_row_is_refused() -> None:
    calls: list[int] = []

    @tool(read_only=True)
    def ping(n: int) -> str:
        """Ping."""
        calls.append(n)
        return "pong"

    model = ScriptedModel([tool_call("ping", {"n": 1})] * 3 + ["giving up"])
    result = await Agent(model=model, tools=[ping]).run("go")
    assert calls == [1, 1]
    last = result.messages[6].tool_results[0]
    assert last.is_error
    assert "same arguments 3 times" in last.content
    assert "Change your approach" in last.content


async def test_five_failing_calls_in_a_row_fail_the_run() -> None:
    @tool(read_only=True)
    def flaky(n: int) -> str:
        """Fails."""
        raise RuntimeError(f"no {n}")

    model = ScriptedModel([tool_call("flaky", {"n": i}) for i in range(10)])
    agent = Agent(model=model, tools=[flaky])
    result = await agent.run("go")
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.code == "repeated_tool_failure"
    assert result.error.hint
    assert len(model.requests) == 5
    assert_valid_transcript(agent.messages)


async def test_a_success_resets_the_failure_count() -> None:
    @tool(read_only=True)
    def maybe(ok: bool, n: int) -> str:
        """Fails unless ok."""
        if not ok:
            raise RuntimeError("nope")
        return "fine"

    turns: list[Any] = [tool_call("maybe", {"ok": i % 4 == 3, "n": i}) for i in range(8)]
    result = await Agent(model=ScriptedModel([*turns, "done"]), tools=[maybe]).run("go")
    assert result.status == "completed"


async def test_an_empty_reply_is_retried_once() -> None:
    model = ScriptedModel([[], "here you go"])
    agent = Agent(model=model)
    events = collect(agent)
    result = await agent.run("hi")
    assert result.status == "completed"
    assert result.text == "here you go"
    assert any(e.type == "run_warning" and e.code == "empty_response" for e in events)
    assert all(m.content for m in agent.messages)


async def test_two_empty_replies_fail_the_run() -> None:
    result = await Agent(model=ScriptedModel([[thinking("hmm")], [text("   ")]])).run("hi")
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.code == "empty_response"


async def test_retryable_provider_errors_are_retried_with_a_warning() -> None:
    model = ScriptedModel([error(RateLimitError("Slow down.", retry_after=0.02)), "finally"])
    agent = Agent(model=model, retry=FAST_RETRY)
    events = collect(agent)
    result = await agent.run("hi")
    assert result.status == "completed"
    failed = [e for e in events if e.type == "request_error"]
    assert len(failed) == 1
    assert failed[0].will_retry
    assert failed[0].retry_in == pytest.approx(0.02)
    assert any(e.type == "run_warning" and e.code == "retrying" for e in events)


async def test_a_retried_turn_discards_what_the_failed_attempt_streamed() -> None:
    model = ScriptedModel([[text("partial answ"), error(ProviderUnavailable("Overloaded."))], "clean answer"])
    agent = Agent(model=model, retry=FAST_RETRY)
    result = await agent.run("hi")
    assert result.text == "clean answer"
    assert "partial" not in json.dumps([m.model_dump() for m in agent.messages])


async def test_retries_give_up_after_the_configured_attempts() -> None:
    model = ScriptedModel([error(ProviderUnavailable("Overloaded.", hint="Try later."))] * 3)
    agent = Agent(model=model, retry=RetryPolicy(attempts=3, base_delay=0.001))
    result = await agent.run("hi")
    assert result.status == "failed"
    assert len(model.requests) == 3
    assert result.error is not None
    assert result.error.code == "provider_unavailable"
    assert result.error.layer == "provider"
    assert result.error.hint == "Try later."


async def test_a_non_retryable_error_fails_at_once_with_its_hint() -> None:
    from ipyagent.agentlib.errors import AuthenticationError

    model = ScriptedModel([error(AuthenticationError("Bad key.", hint="Set OPENAI_API_KEY."))])
    result = await Agent(model=model, retry=FAST_RETRY).run("hi")
    assert result.status == "failed"
    assert len(model.requests) == 1
    assert result.error is not None
    assert result.error.hint == "Set OPENAI_API_KEY."
    from ipyagent import AgentRunFailed

    with pytest.raises(AgentRunFailed, match="Bad key") as raised:
        result.raise_for_status()
    assert raised.value.info == result.error  # the run's own error, code and hint included
    assert raised.value._render_traceback_() == [
        "AgentRunFailed [authentication_failed]: Bad key.",
        "Hint: Set OPENAI_API_KEY.",
    ]


async def test_a_provider_that_raises_a_foreign_exception_fails_the_run_cleanly() -> None:
    def explode(request: Any) -> Any:
        raise KeyError("oops")

    result = await Agent(model=ScriptedModel([explode])).run("hi")
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.code == "unexpected_error"
    assert "KeyError" in result.error.message


async def test_usage_per_request_and_cumulative() -> None:
    model = ScriptedModel(
        [
            [tool_call("add", {"a": 1, "b": 1}), usage(input_tokens=100, output_tokens=10)],
            [text("2"), usage(input_tokens=150, output_tokens=5, cache_read_tokens=80)],
        ],
        context_limit=1000,
    )
    agent = Agent(model=model, tools=[add])
    events = collect(agent)
    result = await agent.run("1+1")
    assert result.usage.input_tokens == 250
    assert result.usage.output_tokens == 15
    assert result.usage.cache_read_tokens == 80
    assert result.usage.requests == 2
    updates = [e for e in events if e.type == "usage_updated"]
    assert [u.request.input_tokens for u in updates] == [100, 150]
    assert updates[-1].total == agent.usage
    assert updates[-1].context.approximate is False
    assert updates[-1].context.used == 150 + 5 + 80
    assert updates[-1].context.limit == 1000
    assert agent.context == updates[-1].context


async def test_context_is_estimated_and_marked_when_not_reported() -> None:
    class Quiet(ScriptedModel):
        async def stream(self, request: Any) -> Any:
            async for event in super().stream(request):
                if event.type != "usage":
                    yield event

    agent = Agent(model=Quiet(["hello there"]))
    events = collect(agent)
    await agent.run("hi")
    update = next(e for e in events if e.type == "usage_updated")
    assert update.context.approximate is True
    assert update.context.used > 0
    assert str(update.context).startswith("~")


async def test_display_payloads_reach_events_but_never_the_model() -> None:
    from ipyagent import ToolOutput

    @tool(read_only=True)
    def chart() -> ToolOutput:
        """Draw."""
        return ToolOutput(text="drew a chart", display={"text/html": "<b>SECRET-PIXELS</b>"})

    model = ScriptedModel([tool_call("chart"), "done"])
    agent = Agent(model=model, tools=[chart])
    events = collect(agent)
    await agent.run("draw")
    shown = [e for e in events if e.type == "tool_result"]
    assert shown[0].display == {"text/html": "<b>SECRET-PIXELS</b>"}
    assert "SECRET-PIXELS" not in json.dumps([r.model_dump(mode="json") for r in model.requests])


async def test_huge_results_are_capped_and_say_so() -> None:
    @tool(read_only=True)
    def dump() -> str:
        """Lots."""
        return "x" * 50_000

    agent = Agent(model=ScriptedModel([tool_call("dump"), "ok"]), tools=[dump], max_result_chars=1000)
    result = await agent.run("go")
    content = result.messages[2].tool_results[0].content
    assert len(content) < 1200
    assert "truncated: 1,000 of 50,000 characters" in content


async def test_send_while_running_is_merged_with_the_tool_results() -> None:
    gate = asyncio.Event()

    @tool(read_only=True)
    async def wait() -> str:
        """Waits for the test."""
        await gate.wait()
        return "waited"

    model = ScriptedModel([tool_call("wait"), "ok"])
    agent = Agent(model=model, tools=[wait])
    executing = asyncio.Event()
    agent.on("tool_executing", lambda e: executing.set())
    run = asyncio.ensure_future(agent.run("start"))
    await asyncio.wait_for(executing.wait(), 2)
    agent.send("also, use metric units")
    agent.send("and be brief")
    gate.set()
    result = await run
    merged = result.messages[2]
    assert merged.role == "user"
    assert merged.tool_results[0].content == "waited"
    assert merged.text == "also, use metric units\n\nand be brief"
    assert model.requests[1].messages[-1] == merged


async def test_send_after_the_final_answer_starts_another_turn() -> None:
    model = ScriptedModel([[text("first")], "second"])
    agent = Agent(model=model)

    def on_text(event: Any) -> None:
        if event.text == "first":
            agent.send("one more thing")

    agent.on("text_end", on_text)
    result = await agent.run("go")
    assert result.text == "second"
    assert model.requests[1].messages[-1].text == "one more thing"


async def test_one_run_at_a_time() -> None:
    agent = Agent(model=ScriptedModel([[text("slow"), *[text(".")] * 50]], delay=0.01))
    first = asyncio.ensure_future(agent.run("a"))
    await asyncio.sleep(0.02)
    with pytest.raises(UserError, match="in flight"):
        await agent.run("b")
    agent.cancel()
    assert (await first).status == "cancelled"


def test_run_sync_works_in_scripts() -> None:
    result = Agent(model=ScriptedModel(["sync hello"])).run_sync("hi")
    assert result.text == "sync hello"


async def test_run_sync_inside_a_running_loop_says_what_to_do() -> None:
    with pytest.raises(UserError, match=r"await agent\.run"):
        Agent(model=ScriptedModel(["x"])).run_sync("hi")


async def test_no_model_and_unknown_models_raise_user_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    from ipyagent.agentlib.endpoints import DEFAULT_BY_KEY

    for key in [env for env, _ in DEFAULT_BY_KEY] + ["IPYAGENT_MODEL"]:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("IPYAGENT_LOCAL_MODEL", "/nonexistent/model.gguf")
    with pytest.raises(UserError, match="No model configured") as caught:
        await Agent().run("hi")
    assert "ANTHROPIC_API_KEY" in caught.value.hint
    assert "ipyagent[local]" in caught.value.hint
    with pytest.raises(UserError, match="No model configured"):
        await Agent().run("hi")
    with pytest.raises(UserError):
        await Agent(model="nowhere/some-model").run("hi")


async def test_a_failed_first_turn_leaves_a_transcript_the_next_run_continues() -> None:
    model = ScriptedModel([error(ProviderUnavailable("down", retryable=False)), "back"])
    agent = Agent(model=model)
    assert (await agent.run("one")).status == "failed"
    assert (await agent.run("two")).text == "back"
    assert [m.text for m in model.requests[1].messages] == ["one", "two"]


async def test_a_paused_turn_is_continued() -> None:
    from ipyagent.agentlib.model import ResponseEnd

    class Pausing(ScriptedModel):
        async def stream(self, request: Any) -> Any:
            async for event in super().stream(request):
                if isinstance(event, ResponseEnd) and len(self.requests) == 1:
                    yield ResponseEnd(finish_reason="pause")
                else:
                    yield event

    model = Pausing([[text("Part one. ")], "Part two."])
    agent = Agent(model=model)
    result = await agent.run("long answer")
    assert result.status == "completed"
    assert len(model.requests) == 2
    assert [m.text for m in agent.messages if m.role == "assistant"] == ["Part one. ", "Part two."]


async def test_an_abandoned_stream_is_closed_at_once() -> None:
    closed: list[bool] = []

    class Tracking(ScriptedModel):
        async def stream(self, request: Any) -> Any:
            try:
                async for event in super().stream(request):
                    yield event
            finally:
                closed.append(True)

    model = Tracking([[text("partial"), error(ProviderUnavailable("down", retryable=False))]])
    await Agent(model=model).run("hi")
    assert closed == [True]


async def test_changing_the_model_between_runs_uses_the_new_one() -> None:
    first, second = ScriptedModel(["from the first"]), ScriptedModel(["from the second"])
    agent = Agent(model=first)
    assert (await agent.run("a")).text == "from the first"
    agent.model = second
    assert (await agent.run("b")).text == "from the second"
    assert len(first.requests) == 1
