"""Enabling an MCP server is a question in the widget: the page's answer starts the server."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ipyagent import Agent
from ipyagent.testing import ScriptedModel, tool_call
from ipyagent.widgets import ChatWidget

DEMO = Path(__file__).parents[1] / "agentlib" / "mcp_demo_server.py"


def question(chat: ChatWidget, timeout: float = 30) -> dict[str, Any]:
    """The question block, as the view's patches have built it for the page."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with chat.lock:
            found = [dict(b) for b in chat.reducer.state["blocks"] if b["kind"] == "question"]
        if found:
            return found[0]
        time.sleep(0.02)
    raise AssertionError("the chat shows no question")


@pytest.mark.parametrize(("answer", "result"), [("Allow", "3"), ("Deny", None)])
def test_the_page_answers_the_enabling_question(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer: str, result: str | None
) -> None:
    monkeypatch.setenv("IPYAGENT_CONFIG", str(tmp_path / "none.toml"))
    model = ScriptedModel([tool_call("demo__add", {"a": 1, "b": 2}), "done"])
    servers = {"demo": {"command": sys.executable, "args": [str(DEMO)]}}
    agent = Agent(model=model, mcp=servers, workspace=tmp_path)
    chat = ChatWidget(agent, interval=0)
    try:
        chat._on_frontend_message(chat, {"action": "hello"}, [])  # a page shows the widget
        chat.submit("add")
        asked = question(chat)
        assert "Enable the MCP server `demo`?" in asked["question"] and asked["choices"] == ["Allow", "Deny"]
        chat._on_frontend_message(chat, {"action": "answer", "id": asked["id"], "answer": answer}, [])
        outcome = chat.wait(60)
    finally:
        chat.close()
        agent.close()
    assert outcome is not None and outcome.status == "completed"
    contents = [r.content for m in outcome.messages for r in m.tool_results]
    if result is None:
        assert contents == ["Unknown tool `demo__add`. Available tools: (none)."]
    else:
        assert contents == [result]
