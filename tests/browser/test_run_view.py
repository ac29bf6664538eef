"""The %%agent run view in a real JupyterLab: live streaming, buttons during a blocking cell,
Stop, and the final state after a reload. Screenshots go to tests/browser/screenshots/<test>/."""

from __future__ import annotations

import time
from typing import Any

from conftest import Lab, cell_running, open_notebook, run_all, screenshot, wait_cell_done, write_notebook

SETUP = """
from ipyagent.testing import ScriptedModel, text, thinking, tool_call
words = " ".join(f"word{i}" for i in range(2000))
m = ScriptedModel([
    [thinking("Planning the answer. " * 10),
     tool_call("run_python", {"code": "from_agent = 41 + 1\\nfrom_agent"}),
     tool_call("list_variables")],
    [text(words)],
], chunk_size=12, delay=0.01)
"""

TEXT = ".ipyagent-run .ipyagent-block[data-kind=text]"


def text_length(page: Any) -> int:
    length: int = page.evaluate(
        f"() => Array.from(document.querySelectorAll('{TEXT}'))"
        ".map(e => e.textContent.length).reduce((a, b) => a + b, 0)"
    )
    return length


def test_a_run_streams_asks_and_survives_a_reload(page: Any, lab: Lab) -> None:
    name = write_notebook(
        lab, "stream.ipynb", ["%load_ext ipyagent", SETUP, "%%agent -m m\nWrite a long answer."]
    )
    open_notebook(page, lab, name)
    run_all(page)

    # The mutating tool asks; the cell is still running; Allow lets it run at once.
    allow = page.locator("button[data-action=allow]").first
    allow.wait_for(state="visible", timeout=60_000)
    screenshot(page, "run_view", "1-permission")
    assert cell_running(page, 2)
    allow.click()
    page.locator(".ipyagent-block[data-kind=tool][data-status=done]").first.wait_for(timeout=10_000)
    assert cell_running(page, 2), "the tool ran while the %%agent cell was still running"

    # The answer grows while the cell runs.
    page.locator(TEXT).first.wait_for(timeout=30_000)
    first = text_length(page)
    time.sleep(1.5)
    second = text_length(page)
    assert second > first > 0
    assert cell_running(page, 2)
    screenshot(page, "run_view", "2-streaming")

    wait_cell_done(page, 2)
    final = text_length(page)
    assert final >= len(" ".join(f"word{i}" for i in range(2000)))
    screenshot(page, "run_view", "3-done")

    # Saved and reloaded: the view comes back complete, from the state the kernel wrote.
    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    time.sleep(1.0)
    page.reload()
    open_notebook(page, lab, name)
    page.locator(TEXT).first.wait_for(timeout=30_000)
    assert text_length(page) == final
    assert page.locator(".ipyagent-block[data-kind=tool]").count() == 2
    screenshot(page, "run_view", "4-reloaded")


def test_stop_cancels_a_running_cell(page: Any, lab: Lab) -> None:
    slow = (
        "from ipyagent.testing import ScriptedModel, text\n"
        "m = ScriptedModel([[text('tick ' * 3000)]], chunk_size=5, delay=0.02)"
    )
    name = write_notebook(lab, "stop.ipynb", ["%load_ext ipyagent", slow, "%%agent -m m\nCount forever."])
    open_notebook(page, lab, name)
    run_all(page)
    try:
        page.locator(TEXT).first.wait_for(timeout=60_000)
    finally:
        screenshot(page, "stop", "running")
    stop = page.locator("button[data-action=stop]").first
    stop.wait_for(state="visible", timeout=10_000)
    started = time.monotonic()
    stop.click()
    wait_cell_done(page, 2, timeout=10_000)
    assert time.monotonic() - started < 5
    assert 0 < text_length(page) < len("tick " * 3000)
    screenshot(page, "stop", "cancelled")


def test_a_control_file_question_says_what_the_file_is_and_offers_no_always(page: Any, lab: Lab) -> None:
    plant = """
from ipyagent.testing import ScriptedModel, tool_call
m = ScriptedModel([tool_call("write_file", {"path": ".mcp.json", "content": "{}"}), "Done."])
"""
    name = write_notebook(
        lab, "control.ipynb", ["%load_ext ipyagent", plant, "%%agent -m m -y --tools files\nPlant it."]
    )
    open_notebook(page, lab, name)
    run_all(page)

    # Under -y the write is still asked about; the question names the file and what it does.
    deny = page.locator("button[data-action=deny]").first
    deny.wait_for(state="visible", timeout=60_000)
    caution = page.locator(".ipyagent-permission-caution").first
    assert ".mcp.json" in caution.inner_text()
    assert "programs" in caution.inner_text()
    assert page.locator("button[data-action=always]").count() == 0
    screenshot(page, "run_view", "control-file-question")
    deny.click()
    wait_cell_done(page, 2)
    page.locator(".ipyagent-block[data-kind=tool][data-status=denied]").first.wait_for(timeout=10_000)
    assert not (lab.root / ".mcp.json").exists()
