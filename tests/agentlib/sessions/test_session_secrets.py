"""A key that a tool prints (or the user types) is never written to the session file, and a
key a tool returns is not sent to the model or shown in the view either: it is ``[redacted]``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ipyagent import Agent, tool
from ipyagent.agentlib.events import EVENT_ADAPTER, AgentEvent
from ipyagent.agentlib.sessions import Session, read_session
from ipyagent.testing import ScriptedModel, tool_call
from ipyagent.widgets.reducer import ViewReducer

KEY = "sk-SESSION-n0t-1n-th3-f1l3-0123456789"
CONFIG_KEY = "cfg-key-fr0m-th3-c0nf1g-f1l3"


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'[endpoints.vllm]\nkind = "openai"\napi_key = "{CONFIG_KEY}"\n')
    monkeypatch.setenv("IPYAGENT_CONFIG", str(config))
    monkeypatch.setenv("OPENAI_API_KEY", KEY)


@tool(read_only=True)
def show_env() -> str:
    """Print the environment, as a careless tool might."""
    return f"OPENAI_API_KEY={KEY}\nvllm key: {CONFIG_KEY}"


async def test_a_key_a_tool_returns_is_in_no_file_request_event_or_view(tmp_path: Path) -> None:
    path = tmp_path / "analysis.agent.jsonl"
    model = ScriptedModel([tool_call("show_env"), "Done."])
    agent = Agent(model=model, tools=[show_env], session=path)
    events: list[AgentEvent] = []
    agent.on("*", events.append)
    result = await agent.run("what is in the environment?")
    assert result.status == "completed", result.error
    agent.close()

    written = path.read_text()
    assert KEY not in written and CONFIG_KEY not in written
    assert "OPENAI_API_KEY=[redacted]" in written  # masked, not dropped
    # The model was not sent the key either, nor was the user's view shown it.
    sent = json.dumps([r.model_dump(mode="json") for r in model.requests])
    assert KEY not in sent and "OPENAI_API_KEY=[redacted]" in sent
    view = ViewReducer()
    for event in events:
        view.feed(event)
    shown = [EVENT_ADAPTER.dump_json(e).decode() for e in events] + [json.dumps(view.state)]
    assert not [text for text in shown if KEY in text or CONFIG_KEY in text]
    # The file still reads back as the same conversation.
    assert read_session(path).messages == agent.messages


def test_the_writer_redacts_whatever_reaches_it(tmp_path: Path) -> None:
    from ipyagent.agentlib.messages import Message

    path = tmp_path / "s.agent.jsonl"
    with Session.open(path) as session:
        session.append_message(Message.user(f'use the key "{KEY}" for this'))
    written = path.read_text()
    assert KEY not in written
    assert read_session(path).messages[0].text == 'use the key "[redacted]" for this'
