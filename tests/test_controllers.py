"""Views hand out the user's actions; controllers steer the agent with them.

The front end's messages go in where a kernel delivers them, through the widget's comm."""

from __future__ import annotations

import asyncio
from typing import Any

from ipyagent import Agent, tool
from ipyagent.agentlib.events import PermissionRequired
from ipyagent.controllers import ChatController, ViewController
from ipyagent.testing import ScriptedModel, tool_call
from ipyagent.widgets import ChatView, ChatWidget, RunView
from ipyagent.widgets.view_state import Action


def click(view: Any, content: dict[str, Any]) -> None:
    """A message from the front end, as the kernel hands it to the widget's comm."""
    view.comm.handle_msg({"content": {"data": {"method": "custom", "content": content}}, "buffers": []})


@tool
def write(text: str) -> str:
    """Write."""
    return "written"


def test_a_view_hands_out_the_users_actions_and_holds_no_agent() -> None:
    view = RunView(interval=0)
    actions: list[Action] = []
    view.on_action(actions.append)
    click(view, {"action": "hello"})
    click(view, {"action": "permission", "id": "c1", "decision": "deny"})
    click(view, {"action": "permission", "id": "c1", "decision": "perhaps"})  # not an action
    click(view, {"action": "format_disk"})
    view.on_action(actions.append, remove=True)
    click(view, {"action": "stop"})
    assert actions == [{"action": "hello"}, {"action": "permission", "id": "c1", "decision": "deny"}]
    assert view.live.is_set() and view.state["live"] is True
    assert not hasattr(view, "agent")
    view.close()


async def test_a_click_reaches_the_agent_through_the_controller() -> None:
    agent = Agent(model=ScriptedModel([tool_call("write", {"text": "x"}), "ok"]), tools=[write])
    view = RunView(interval=0)
    controller = ViewController(view, agent, hello_grace=60)
    click(view, {"action": "hello"})  # a person is there: nothing is denied on their behalf

    def on_permission(event: PermissionRequired) -> None:
        click(view, {"action": "permission", "id": event.call_id, "decision": "deny"})

    agent.on("permission_required", on_permission)
    agent.on("*", view.feed)
    await agent.run("write x")
    tools = [b for b in view.reducer.state["blocks"] if b["kind"] == "tool"]
    assert [t["status"] for t in tools] == ["denied"]
    controller.close()
    view.close()


async def test_with_no_front_end_the_controller_denies_what_nobody_can_answer() -> None:
    agent = Agent(model=ScriptedModel([tool_call("write", {"text": "x"}), "ok"]), tools=[write])
    view = RunView(interval=0)
    controller = ViewController(view, agent, hello_grace=0)
    result = await asyncio.wait_for(agent.run("write x"), 30)
    denied = [r for m in result.messages for r in m.tool_results]
    assert [r.denied for r in denied] == [True]
    assert "front end did not show the widget" in denied[0].content
    controller.close()
    view.close()


def test_the_chat_runs_what_is_typed_and_starts_over_on_new() -> None:
    chat = ChatWidget(Agent(model=ScriptedModel(["Hello.", "Again."])), interval=0)
    try:
        assert isinstance(chat, ChatView) and isinstance(chat.controller, ChatController)
        click(chat, {"action": "send", "text": "  hi  "})
        result = chat.wait(30)
        assert result is not None and result.text == "Hello."
        assert [(b["kind"], b.get("text")) for b in chat.state["blocks"]] == [
            ("user", "hi"),
            ("text", "Hello."),
        ]
        click(chat, {"action": "send", "text": "   "})  # nothing typed: nothing sent
        assert len(chat.agent.messages) == 2
        click(chat, {"action": "new"})
        assert chat.state["blocks"] == [] and chat.agent.messages == []
        click(chat, {"action": "retry"})  # the last prompt again, in the new conversation
        chat.wait(30)
        assert [m.text for m in chat.agent.messages] == ["hi", "Again."]
    finally:
        chat.close()
    chat.close()  # again, as the widget's finalizer does after an explicit close


def test_a_model_that_cannot_be_used_is_reported_in_the_chat() -> None:
    chat = ChatWidget(Agent(model=ScriptedModel(["ok"])), interval=0)
    try:
        click(chat, {"action": "model", "model": "no-such-endpoint/model"})
        error = chat.state["blocks"][-1]
        assert error["kind"] == "error" and error["hint"]
        click(chat, {"action": "model", "model": "ollama/qwen3"})
        assert chat.state["model"] == "ollama/qwen3"
    finally:
        chat.close()


def test_mentions_in_a_chat_message_go_with_it() -> None:
    import pandas as pd

    from ipyagent.kernel.mentions import mentioned_variables

    namespace = {"sales": pd.DataFrame({"region": ["north", "south"], "units": [3, 5]})}
    model = ScriptedModel(["Two regions."])
    chat = ChatWidget(
        Agent(model=model), interval=0, mentions=lambda text: mentioned_variables(text, namespace)
    )
    try:
        click(chat, {"action": "send", "text": "How many regions in @sales?"})
        chat.wait(30)
        [message] = model.requests[0].messages
        _typed, attached = message.content
        assert message.text == "How many regions in @sales?"  # what the user typed
        assert attached.attached == "@sales"  # type: ignore[union-attr]
        assert '<variable name="sales">' in attached.text and "units" in attached.text  # type: ignore[union-attr]
    finally:
        chat.close()


def send_with_files(view: Any, text: str, files: dict[str, bytes]) -> None:
    """A chat message with files picked in the composer: names in the content, bytes as buffers."""
    content = {"action": "send", "text": text, "files": [{"name": name} for name in files]}
    data = {"method": "custom", "content": content}
    view.comm.handle_msg({"content": {"data": data}, "buffers": [memoryview(b) for b in files.values()]})


PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d49444154789c6360f8cf"
    "c0f01f0005000201e0e5e1e80000000049454e44ae426082"
)


def test_files_picked_in_the_chat_go_with_the_message() -> None:
    from ipyagent.agentlib.messages import ImageBlock, TextBlock

    model = ScriptedModel(["A chart and a note."])
    chat = ChatWidget(Agent(model=model), interval=0)
    try:
        send_with_files(chat, "What are these?", {"chart.png": PNG, 'notes".md': b"Revenue fell."})
        chat.wait(30)
        [message] = model.requests[0].messages
        _typed, image, notes = message.content
        assert message.text == "What are these?"
        assert isinstance(image, ImageBlock) and image.media_type == "image/png"
        assert isinstance(notes, TextBlock) and notes.attached == 'notes".md'
        assert notes.text == '<file name="notes&quot;.md">\nRevenue fell.\n</file>'
        shown = [b["label"] for b in chat.state["blocks"] if b["kind"] == "attachment"]
        assert shown == ["an image", 'notes".md']
    finally:
        chat.close()


def test_a_file_that_cannot_be_attached_is_reported_in_the_chat_and_nothing_is_sent() -> None:
    model = ScriptedModel(["Never."])
    chat = ChatWidget(Agent(model=model), interval=0)
    try:
        send_with_files(chat, "Read this.", {"data.bin": b"\x00\x01binary"})
        chat.wait(30)
        assert not model.requests
        [error] = [b for b in chat.state["blocks"] if b["kind"] == "error"]
        assert "data.bin is not a text file" in error["message"]
        # A file list that does not match the buffers is not an action at all.
        actions: list[Action] = []
        chat.on_action(actions.append)
        chat.comm.handle_msg(
            {
                "content": {
                    "data": {
                        "method": "custom",
                        "content": {"action": "send", "text": "x", "files": [{"name": "a.txt"}]},
                    }
                },
                "buffers": [],
            }
        )
        assert actions == []
    finally:
        chat.close()
