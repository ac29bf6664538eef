"""The chat widget in a real JupyterLab: type, send, see the answer stream in; new conversation."""

from __future__ import annotations

from typing import Any

from conftest import Lab, open_notebook, run_all, screenshot, wait_cell_done, write_notebook

SETUP = """
from ipyagent.testing import ScriptedModel, text, tool_call
m = ScriptedModel(
    [[tool_call("list_variables")], [text("You have a variable called answer_seed.")], "Hello again."],
    chunk_size=6, delay=0.01,
)
answer_seed = 7
"""


def test_chat_sends_streams_and_starts_over(page: Any, lab: Lab) -> None:
    name = write_notebook(lab, "chat.ipynb", ["%load_ext ipyagent", SETUP, "%agent chat -m m"])
    open_notebook(page, lab, name)
    run_all(page)
    wait_cell_done(page, 2, timeout=60_000)
    chat = page.locator(".ipyagent-chat")
    chat.wait_for(timeout=30_000)
    page.wait_for_selector(".ipyagent-chat[data-live=true]", timeout=30_000)

    chat.locator("textarea[data-role=input]").fill("What variables do I have?")
    chat.locator("button[data-action=send]").click()
    answer = chat.locator(".ipyagent-block[data-kind=text]").last
    answer.wait_for(timeout=30_000)
    page.wait_for_function(
        "() => document.querySelector('.ipyagent-chat').dataset.status === 'completed'", timeout=30_000
    )
    assert "answer_seed" in answer.inner_text()
    user = chat.locator(".ipyagent-block[data-kind=user]")
    assert user.first.inner_text().strip() == "What variables do I have?"
    assert chat.locator(".ipyagent-block[data-kind=tool][data-status=done]").count() == 1
    screenshot(page, "chat", "1-answered")

    chat.locator("button[data-action=new]").click()
    page.wait_for_function(
        "() => document.querySelectorAll('.ipyagent-chat .ipyagent-block').length === 0", timeout=10_000
    )
    chat.locator("textarea[data-role=input]").fill("Hi")
    chat.locator("button[data-action=send]").click()
    page.wait_for_function(
        "() => document.querySelector('.ipyagent-chat').dataset.status === 'completed'", timeout=30_000
    )
    assert chat.locator(".ipyagent-block[data-kind=text]").last.inner_text().strip() == "Hello again."
    screenshot(page, "chat", "2-new-conversation")


RESUMED = """
from ipyagent import Agent
from ipyagent.agentlib.messages import Message, TextBlock, ToolCallBlock, ToolResultBlock
from ipyagent.testing import ScriptedModel
from ipyagent.widgets import ChatWidget
call = ToolCallBlock.from_raw(id="call_w", name="write_file", raw_arguments='{"path": "x"}')
saved = []
for i in range(1500):
    answer = Message(role="assistant", content=(TextBlock(text=f"answer {i}"),))
    saved += [Message.user(f"question {i}"), answer]
saved += [
    Message(role="assistant", content=(call,)),
    Message(role="user", content=(
        ToolResultBlock(tool_call_id="call_w", content="no", is_error=True, denied=True),
    )),
]
ChatWidget(Agent(model=ScriptedModel(["ok"]), messages=saved))
"""


def test_a_resumed_chat_shows_its_latest_history_through_the_widget_manager(page: Any, lab: Lab) -> None:
    name = write_notebook(lab, "resumed.ipynb", [RESUMED])
    open_notebook(page, lab, name)
    run_all(page)
    wait_cell_done(page, 0, timeout=60_000)
    chat = page.locator(".ipyagent-chat")
    chat.wait_for(timeout=30_000)
    chat.locator(".ipyagent-block[data-kind=tool]").last.wait_for(timeout=30_000)
    assert chat.locator(".ipyagent-block[data-kind=tool] .ipyagent-badge").last.inner_text() == "denied"
    assert "answer 1499" in chat.locator(".ipyagent-block[data-kind=text]").last.inner_text()
    shown = chat.locator(".ipyagent-block").count()
    assert 0 < shown < 3002, "the history is drawn in pages, not all at once"
    screenshot(page, "chat", "3-resumed")


def test_files_attached_in_the_chat_reach_the_model(page: Any, lab: Lab, tmp_path: Any) -> None:
    setup = "from ipyagent.testing import ScriptedModel\nm = ScriptedModel(['A note and a chart.'])"
    name = write_notebook(lab, "attach.ipynb", ["%load_ext ipyagent", setup, "%agent chat -m m"])
    open_notebook(page, lab, name)
    run_all(page)
    wait_cell_done(page, 2, timeout=60_000)
    page.wait_for_selector(".ipyagent-chat[data-live=true]", timeout=30_000)
    chat = page.locator(".ipyagent-chat")
    notes = tmp_path / "notes.md"
    notes.write_text("Revenue fell in May.")
    chart = tmp_path / "chart.png"
    chart.write_bytes(bytes.fromhex(PNG))
    chat.locator("input[data-role=files]").set_input_files([str(notes), str(chart)])
    chips = chat.locator("[data-role=attachment]")
    assert chips.count() == 2 and "notes.md" in chips.first.inner_text()
    chat.locator("textarea[data-role=input]").fill("What are these?")
    chat.locator("button[data-action=send]").click()
    page.wait_for_function(
        "() => document.querySelector('.ipyagent-chat').dataset.status === 'completed'", timeout=30_000
    )
    assert chips.count() == 0  # sent with the message
    labels = chat.locator(".ipyagent-block[data-kind=attachment]").all_inner_texts()
    assert any("notes.md" in label for label in labels) and any("image" in label for label in labels)
    screenshot(page, "chat", "3-attachments")


PNG = (
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d49444154789c6360f8cf"
    "c0f01f0005000201e0e5e1e80000000049454e44ae426082"
)
