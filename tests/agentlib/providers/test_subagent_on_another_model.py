"""A sub-agent on a model listed in Delegation(models=...): its requests go to that model's
endpoint (a loopback server speaking the OpenAI wire format), the parent's stay scripted."""

from __future__ import annotations

import pytest
from wire_server import Reply, WireServer
from wire_transcripts import chunk, sse

from ipyagent import Agent, Delegation
from ipyagent.agentlib import events as ev
from ipyagent.agentlib.endpoints import register_endpoint
from ipyagent.testing import ScriptedModel, tool_call


async def test_a_listed_model_answers_the_sub_agent(
    server: WireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    register_endpoint("team", base_url=server.base_url + "/v1", key_env="TEAM_KEY")
    monkeypatch.setenv("TEAM_KEY", "sk-team-12345678")
    server.queue(
        Reply(
            sse(chunk({"content": "Answer from "}), chunk({"content": "the small model."}), chunk({}, "stop"))
        )
    )
    parent = ScriptedModel([[tool_call("delegate", {"task": "Say hi.", "model": "team/small"})], "Relayed."])
    agent = Agent(model=parent, delegate=Delegation(models=["team/small"]))
    started: list[ev.SubagentStarted] = []
    agent.on("subagent_started", started.append)
    result = await agent.run("go")

    assert result.text == "Relayed."
    (answer,) = [r for m in agent.messages for r in m.tool_results]
    assert answer.content == "Answer from the small model." and not answer.is_error
    assert [s.model for s in started] == ["team/small"]
    (sent,) = server.requests
    assert sent.json["model"] == "small"
    assert sent.json["messages"][-1]["content"] == "Say hi."
    assert len(parent.requests) == 2  # the parent's own turns only
