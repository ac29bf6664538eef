"""The chat widget's kernel side: what it writes to its traits for a resumed conversation."""

from __future__ import annotations

from ipyagent import Agent
from ipyagent.agentlib.messages import Message, TextBlock
from ipyagent.testing import ScriptedModel
from ipyagent.widgets import ChatWidget


def saved(count: int) -> list[Message]:
    return [
        Message.user(f"q{i}") if i % 2 == 0 else Message(role="assistant", content=(TextBlock(text=f"a{i}"),))
        for i in range(count)
    ]


def test_the_history_goes_once_in_its_own_trait_and_a_run_writes_only_its_blocks() -> None:
    chat = ChatWidget(Agent(model=ScriptedModel(["Fine."]), messages=saved(1000)), interval=0)
    try:
        assert len(chat.history) == 1000
        assert chat.history[-1] == {"id": "h999.0", "kind": "text", "text": "a999", "streaming": False}
        assert chat.state["blocks"] == []
        writes: list[str] = []
        chat.observe(lambda change: writes.append(change["name"]), names=["history", "state"])
        chat.submit("and now?")
        chat.wait(30)
        assert "history" not in writes, "a run must not send the history again"
        assert [b["kind"] for b in chat.state["blocks"]] == ["user", "text"]
        chat.new_conversation()
        assert chat.history == [] and chat.state["blocks"] == []
    finally:
        chat.close()
