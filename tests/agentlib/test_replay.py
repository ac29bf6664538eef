"""ReplayModel: record a model's streams to a cassette, replay them with no model at all."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ipyagent import Agent, tool
from ipyagent.agentlib.endpoints import provider_for
from ipyagent.agentlib.errors import AuthenticationError, ProviderError, RateLimitError
from ipyagent.agentlib.messages import Message
from ipyagent.agentlib.model import ModelRequest, OutputSchema, Provider, ProviderEvent, ToolSpec
from ipyagent.agentlib.providers.replay import CassetteWarning, ReplayModel, normalize_request
from ipyagent.testing import ScriptedModel, error, text, thinking, tool_call


@tool(read_only=True)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def script() -> ScriptedModel:
    # Tool calls without ids: the agent makes random ones, so the replayed run's ids differ.
    return ScriptedModel(
        [
            [thinking("Use the tool."), tool_call("add", {"a": 2, "b": 3})],
            [text("The sum is 5.")],
        ],
        context_limit=4096,
    )


class Spy:
    """A provider that keeps every event another one streams."""

    def __init__(self, inner: Provider) -> None:
        self.inner = inner
        self.events: list[ProviderEvent] = []

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def context_limit(self) -> int | None:
        return self.inner.context_limit

    async def stream(self, request: ModelRequest) -> AsyncIterator[ProviderEvent]:
        async for event in self.inner.stream(request):
            self.events.append(event)
            yield event


def request(prompt: str, **more: Any) -> ModelRequest:
    more.setdefault("messages", [Message.user(prompt)])
    return ModelRequest(model="script", **more)


async def drain(provider: Provider, req: ModelRequest) -> tuple[list[ProviderEvent], BaseException | None]:
    events: list[ProviderEvent] = []
    try:
        async for event in provider.stream(req):
            events.append(event)
    except BaseException as exc:
        return events, exc
    return events, None


async def test_a_replayed_run_streams_the_recorded_events_with_no_model(tmp_path: Path) -> None:
    cassette = tmp_path / "run.cassette.jsonl"
    recording = Spy(ReplayModel(script(), cassette=cassette, mode="record"))
    recorded = await Agent(model=recording, tools=[add]).run("2 + 3?")
    assert recorded.status == "completed"

    replaying = Spy(ReplayModel(cassette=cassette))  # no wrapped model
    assert replaying.model_id == "scripted/script"
    assert replaying.context_limit == 4096
    replayed = await Agent(model=replaying, tools=[add]).run("2 + 3?")

    assert replayed.status == "completed"
    assert replaying.events == recording.events
    assert replayed.text == recorded.text == "The sum is 5."
    # The same transcript, up to the agent's random ids and timestamps.
    assert [m.text for m in replayed.messages] == [m.text for m in recorded.messages]
    assert normalize_request(request("", messages=replayed.messages)) == normalize_request(
        request("", messages=recorded.messages)
    )
    lines = cassette.read_text().splitlines()
    assert json.loads(lines[0]) == {"format": "ipyagent-cassette", "version": 3}
    assert len(lines) == 3  # the header, then one line per request
    second = json.loads(lines[2])
    assert second["reuse"] == 1 and second["same"] == ["system", "tools", "settings"]  # stored as deltas


async def test_a_changed_prompt_fails_with_a_diff_and_a_hint(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    await Agent(model=ReplayModel(script(), cassette=cassette, mode="record"), tools=[add]).run("2 + 3?")
    result = await Agent(model=ReplayModel(cassette=cassette), tools=[add]).run("2 + 4?")
    assert result.status == "failed" and result.error is not None
    assert result.error.code == "replay_mismatch"
    assert result.error.retryable is False
    message = result.error.message
    assert message.startswith("Request 1 of 2 differs from the one recorded in")
    assert "--- recorded\n+++ this run" in message
    assert "-  text: 2 + 3?\n+  text: 2 + 4?" in message
    assert "mode='record'" in result.error.hint


async def test_a_changed_tool_schema_or_model_shows_in_the_diff(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    spec = ToolSpec(name="add", description="Add.", parameters={"properties": {"a": {"type": "integer"}}})
    await drain(ReplayModel(script(), cassette=cassette, mode="record"), request("hi", tools=[spec]))

    changed = spec.model_copy(update={"parameters": {"properties": {"a": {"type": "number"}}}})
    _, exc = await drain(ReplayModel(cassette=cassette), request("hi", tools=[changed]))
    assert isinstance(exc, ProviderError) and exc.code == "replay_mismatch"
    assert '-          "type": "integer"\n+          "type": "number"' in str(exc)

    _, exc = await drain(
        ReplayModel(cassette=cassette, model_id="openai/script"), request("hi", tools=[spec])
    )
    assert isinstance(exc, ProviderError)
    assert "-model: scripted/script\n+model: openai/script" in str(exc)


async def test_the_tool_choice_is_recorded_and_compared(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    spec = ToolSpec(name="add", description="Add.", parameters={"properties": {}})
    asked = request("hi", tools=[spec], tool_choice=("add",))
    await drain(ReplayModel(script(), cassette=cassette, mode="record"), asked)
    assert json.loads(cassette.read_text().splitlines()[1])["request"]["tool_choice"] == ["add"]

    events, exc = await drain(ReplayModel(cassette=cassette), asked)
    assert exc is None and events
    _, exc = await drain(ReplayModel(cassette=cassette), asked.model_copy(update={"tool_choice": "auto"}))
    assert isinstance(exc, ProviderError) and exc.code == "replay_mismatch"
    assert '-tool_choice: ["add"]' in str(exc)


async def test_the_output_schema_is_recorded_and_compared(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    schema = OutputSchema(json_schema={"type": "object", "properties": {"n": {"type": "integer"}}})
    asked = request("hi", output_schema=schema)
    await drain(ReplayModel(script(), cassette=cassette, mode="record"), asked)
    recorded = json.loads(cassette.read_text().splitlines()[1])["request"]
    assert recorded["output_schema"]["json_schema"] == schema.json_schema
    events, exc = await drain(ReplayModel(cassette=cassette), asked)
    assert exc is None and events
    _, exc = await drain(ReplayModel(cassette=cassette), request("hi"))  # asked for text instead
    assert isinstance(exc, ProviderError) and exc.code == "replay_mismatch"
    assert "-output_schema: " in str(exc)


async def test_a_version_2_cassette_still_replays(tmp_path: Path) -> None:
    # Written before requests had an output schema: its requests have none, and compare as before.
    cassette = tmp_path / "c.jsonl"
    spec = ToolSpec(name="add", description="Add.", parameters={"properties": {}})
    await drain(ReplayModel(script(), cassette=cassette, mode="record"), request("hi", tools=[spec]))
    header, *records = cassette.read_text().splitlines()
    assert "output_schema" not in json.loads(records[0])["request"]
    cassette.write_text("\n".join([json.dumps({**json.loads(header), "version": 2}), *records]) + "\n")
    events, exc = await drain(ReplayModel(cassette=cassette), request("hi", tools=[spec]))
    assert exc is None and events


async def test_a_version_1_cassette_replays_without_comparing_the_tool_choice(tmp_path: Path) -> None:
    # Written before requests had a tool_choice: what the model was then allowed to call is not
    # on file, so any choice matches; everything else is still compared.
    cassette = tmp_path / "c.jsonl"
    spec = ToolSpec(name="add", description="Add.", parameters={"properties": {}})
    await drain(ReplayModel(script(), cassette=cassette, mode="record"), request("hi", tools=[spec]))
    header, *records = cassette.read_text().splitlines()
    assert json.loads(header)["version"] == 3
    old_header = json.dumps({**json.loads(header), "version": 1})
    cassette.write_text("\n".join([old_header, *records]) + "\n")

    events, exc = await drain(
        ReplayModel(cassette=cassette), request("hi", tools=[spec], tool_choice=("add",))
    )
    assert exc is None and events
    _, exc = await drain(ReplayModel(cassette=cassette), request("ho", tools=[spec], tool_choice=("add",)))
    assert isinstance(exc, ProviderError) and exc.code == "replay_mismatch"


async def test_volatile_text_does_not_count_as_a_change(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"

    def system(day: str, where: Path) -> str:
        return f"You are X. Today's date is {day}.\n\nWorkspace: {where}. Relative file paths are ..."

    here, there = tmp_path / "a", tmp_path / "b"
    first = request(f"look at <Foo at 0x7f3a2b4c5d6e> in {here}/data.csv", system=system("2024-01-02", here))
    await drain(ReplayModel(script(), cassette=cassette, mode="record", workspace=here), first)
    again = request(
        f"look at <Foo at 0x55d1e2f3a4b5> in {there}/data.csv", system=system("2031-12-31", there)
    )
    events, exc = await drain(ReplayModel(cassette=cassette, workspace=there), again)
    assert exc is None and events


async def test_a_scrub_added_later_applies_to_what_was_recorded_before_it(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    await drain(ReplayModel(script(), cassette=cassette, mode="record"), request("memory: 410 bytes"))
    scrub = [(r"memory: \d+ bytes", "memory: … bytes")]
    events, exc = await drain(ReplayModel(cassette=cassette, scrub=scrub), request("memory: 194 bytes"))
    assert exc is None and events
    # Without the scrub the two differ, as before.
    _, exc = await drain(ReplayModel(cassette=cassette), request("memory: 194 bytes"))
    assert isinstance(exc, ProviderError) and exc.info.code == "replay_mismatch"


async def test_running_past_the_end_of_the_cassette_is_a_clear_error(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    await Agent(model=ReplayModel(script(), cassette=cassette, mode="record"), tools=[add]).run("2 + 3?")
    agent = Agent(model=ReplayModel(cassette=cassette), tools=[add])
    assert (await agent.run("2 + 3?")).status == "completed"
    result = await agent.run("And 4 + 4?")
    assert result.status == "failed" and result.error is not None
    assert result.error.code == "replay_exhausted"
    assert "has 2 recorded request(s); this is request 3" in result.error.message


async def test_a_missing_cassette_says_how_to_record_one(tmp_path: Path) -> None:
    model = ReplayModel(cassette=tmp_path / "nope.jsonl")
    with pytest.raises(Exception, match="No cassette at") as info:
        _ = model.model_id
    assert "record" in getattr(info.value, "hint", "")


class QuotaError(RateLimitError):
    """A provider-specific error class that the replay does not know."""


@pytest.mark.parametrize(
    ("raised", "expected"),
    [
        (RateLimitError("Slow down.", hint="Wait a minute.", retry_after=7.0), RateLimitError),
        (AuthenticationError("Bad key.", hint="Set OPENAI_API_KEY.", status_code=401), AuthenticationError),
        (QuotaError("Over quota.", hint="Buy more.", code="quota"), RateLimitError),  # nearest known class
        (ValueError("a bug in a custom provider"), ValueError),
    ],
)
async def test_errors_replay_as_the_same_class(
    tmp_path: Path, raised: Exception, expected: type[Exception]
) -> None:
    cassette = tmp_path / "c.jsonl"
    model = ScriptedModel([[text("Part"), error(raised)]])  # type: ignore[arg-type]  # ValueError too
    events, first = await drain(ReplayModel(model, cassette=cassette, mode="record"), request("hi"))
    assert first is raised  # passed through untouched while recording
    replayed_events, again = await drain(ReplayModel(cassette=cassette), request("hi"))
    assert replayed_events == events
    assert type(again) is expected
    assert str(again) == str(raised)
    if isinstance(raised, ProviderError):
        assert isinstance(again, ProviderError)
        assert again.info == raised.info
        assert again.retry_after == raised.retry_after


async def test_a_torn_last_line_is_skipped_with_a_warning(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    model = ReplayModel(ScriptedModel(["one", "two"]), cassette=cassette, mode="record")
    await drain(model, request("first"))
    await drain(model, request("second"))
    raw = cassette.read_bytes()
    cassette.write_bytes(raw[: len(raw) - 25])  # a crash in the middle of writing the last line

    replay = ReplayModel(cassette=cassette)
    with pytest.warns(CassetteWarning, match="torn last line"):
        events, exc = await drain(replay, request("first"))
    assert exc is None and "".join(getattr(e, "text", "") for e in events) == "one"
    _, exc = await drain(replay, request("second"))
    assert isinstance(exc, ProviderError) and exc.code == "replay_exhausted"


async def test_a_whole_last_line_without_its_newline_is_replayed(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    model = ReplayModel(ScriptedModel(["one", "two"]), cassette=cassette, mode="record")
    await drain(model, request("first"))
    await drain(model, request("second"))
    cassette.write_bytes(cassette.read_bytes().rstrip(b"\n"))  # an editor that strips it

    replay = ReplayModel(cassette=cassette)  # no warning: nothing is missing
    await drain(replay, request("first"))
    events, exc = await drain(replay, request("second"))
    assert exc is None and "".join(getattr(e, "text", "") for e in events) == "two"


async def test_a_damaged_line_names_its_line_number(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    model = ReplayModel(ScriptedModel(["one", "two"]), cassette=cassette, mode="record")
    await drain(model, request("first"))
    await drain(model, request("second"))
    lines = cassette.read_text().splitlines(keepends=True)
    cassette.write_text(lines[0] + "{oops\n" + lines[2])
    _, exc = await drain(ReplayModel(cassette=cassette), request("first"))
    assert "damaged at line 2" in str(exc)


async def test_recording_again_starts_a_new_cassette(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    await drain(ReplayModel(ScriptedModel(["old"]), cassette=cassette, mode="record"), request("old"))
    await drain(ReplayModel(ScriptedModel(["new"]), cassette=cassette, mode="record"), request("new"))
    events, exc = await drain(ReplayModel(cassette=cassette), request("new"))
    assert exc is None and next(getattr(e, "text", None) for e in events) == "new"
    assert os.listdir(tmp_path) == ["c.jsonl"]  # the atomic write left nothing behind


KEY = "sk-FAKE-replay-k3y-0123456789abcdef"
PASSWORD = "hunter2-in-the-url"
CALL = {"index": 0, "id": "call_a", "type": "function", "function": {"name": "leak", "arguments": "{}"}}


def sse(*chunks: dict[str, Any]) -> bytes:
    return b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks) + b"data: [DONE]\n\n"


async def test_no_key_header_or_url_credential_reaches_the_cassette(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("IPYAGENT_CONFIG", str(tmp_path / "no-config.toml"))
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", f"https://user:{PASSWORD}@api.example.test/v1")
    replies = [
        sse(
            {"choices": [{"index": 0, "delta": {"tool_calls": [CALL]}}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        ),
        sse({"choices": [{"index": 0, "delta": {"content": "Done."}, "finish_reason": "stop"}]}),
    ]  # fmt: skip
    seen: list[httpx.Request] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req)
        body = replies[len(seen) - 1]
        return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})

    @tool(read_only=True)
    def leak() -> str:
        """Echo the key, as a careless tool might."""
        return f"the key is {KEY}"

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        real = provider_for("openai/gpt-4.1", client=client)
        cassette = tmp_path / "c.jsonl"
        recorder = ReplayModel(real, cassette=cassette, mode="record")
        result = await Agent(model=recorder, tools=[leak]).run("go")
    assert result.status == "completed", result.error
    # The provider had the credentials: the key (httpx sends the URL's user:password instead).
    assert seen[0].url.host == "api.example.test" and seen[0].headers["authorization"]
    written = cassette.read_text()
    assert "the key is [redacted]" in written  # the tool's echo, redacted
    for secret in (KEY, PASSWORD, "Bearer", "api.example.test"):
        assert secret not in written


async def test_a_stream_stopped_midway_replays_up_to_there_then_cancels(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    stream = ReplayModel(ScriptedModel(["abcdefgh"], chunk_size=2), cassette=cassette, mode="record").stream(
        request("hi")
    )
    first = await stream.__anext__()
    await stream.aclose()  # type: ignore[attr-defined]  # an async generator: the consumer left
    events, exc = await drain(ReplayModel(cassette=cassette), request("hi"))
    assert events == [first]
    assert isinstance(exc, asyncio.CancelledError)


class GreedyScript(ScriptedModel):
    """A scripted model that says it decodes greedily at temperature 0, as the local model does."""

    greedy_at_zero = True


async def test_recording_asks_a_greedy_model_for_temperature_0_and_keeps_the_request(
    tmp_path: Path,
) -> None:
    cassette = tmp_path / "c.jsonl"
    greedy, other = GreedyScript(["a", "b"]), ScriptedModel(["a"])
    await drain(ReplayModel(greedy, cassette=cassette, mode="record"), request("unset"))
    # Only the request's own temperature is replaced, never one the agent chose.
    chosen = request("chosen", settings={"temperature": 0.7})
    await drain(ReplayModel(greedy, cassette=tmp_path / "d.jsonl", mode="record"), chosen)
    await drain(ReplayModel(other, cassette=tmp_path / "e.jsonl", mode="record"), request("other"))
    assert [r.settings.temperature for r in greedy.requests] == [0.0, 0.7]
    assert other.requests[0].settings.temperature is None  # a hosted API gets what was asked
    # The cassette holds the request as the agent made it, so it replays as before.
    events, exc = await drain(ReplayModel(cassette=cassette), request("unset"))
    assert exc is None and next(getattr(e, "text", None) for e in events) == "a"


async def test_recording_can_keep_the_models_own_sampling(tmp_path: Path) -> None:
    greedy = GreedyScript(["a"])
    model = ReplayModel(greedy, cassette=tmp_path / "c.jsonl", mode="record", deterministic=False)
    await drain(model, request("sampled"))
    assert greedy.requests[0].settings.temperature is None


async def test_replay_does_not_wait_out_a_recorded_retry_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Recording waits what the provider asked (the server is real); a replay serves the answers
    # from the file, so it must not spend the recorded two minutes again.
    waits: list[float] = []
    real_sleep = asyncio.sleep

    async def no_real_wait(seconds: float, *args: Any) -> Any:
        if seconds > 0:
            waits.append(seconds)
        return await real_sleep(0, *args)

    monkeypatch.setattr(asyncio, "sleep", no_real_wait)
    limited = RateLimitError("Slow down.", retry_after=120.0)
    cassette = tmp_path / "c.jsonl"
    recorder = ReplayModel(ScriptedModel([[error(limited)], "Answer."]), cassette=cassette, mode="record")
    recorded = await Agent(model=recorder).run("hi")
    assert recorded.text == "Answer."
    assert waits == [120.0]

    waits.clear()
    retries: list[Any] = []
    agent = Agent(model=ReplayModel(cassette=cassette))
    agent.on("request_error", retries.append)
    replayed = await agent.run("hi")
    assert replayed.text == "Answer."
    assert waits == []
    # The events still say what was recorded: the run retried after the provider's 120 s.
    assert [e.retry_in for e in retries] == [120.0]


def test_prompt_caching_is_not_part_of_what_a_replay_matches(tmp_path: Path) -> None:
    """Caching changes the bill, never the answer: a cassette recorded before prompt caching
    existed (settings without it), or with another setting, still replays."""
    from ipyagent.agentlib.model import ModelSettings

    recorded = {"thinking": None, "max_tokens": None, "temperature": None}
    for cache in ("5m", "1h", "off"):
        request = ModelRequest(
            model="m",
            messages=[Message.user("hi")],
            settings=ModelSettings(prompt_cache=cache),
            cache_key="k",
        )
        assert normalize_request(request)["settings"] == recorded
        assert "cache_key" not in json.dumps(normalize_request(request))
