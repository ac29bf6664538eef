"""A sub-agent's work in the run view, in a real JupyterLab: nested in its delegate card, its
permission prompt answered there, folded once done, and back the same after a reload.
Screenshots go to tests/browser/screenshots/subagent/."""

from __future__ import annotations

import time
from typing import Any

from conftest import Lab, cell_running, open_notebook, run_all, screenshot, wait_cell_done, write_notebook

SETUP = """
from ipyagent.testing import ScriptedModel, pause, text, tool_call
m = ScriptedModel([
    [text("Handing this to a sub-agent."),
     tool_call("delegate", {"task": "Set x to 42.", "tools": ["run_python", "list_variables"]})],
    [text("Setting x."), pause(3), tool_call("run_python", {"code": "x = 41 + 1"})],
    [tool_call("list_variables")],
    [text("x is 42 now.")],
    [text("Done: the sub-agent set x to 42.")],
], chunk_size=8, delay=0.01)
"""

CARD = ".ipyagent-run .ipyagent-block[data-kind=tool]:has(> .ipyagent-subagent:not([hidden]))"
NESTED = f"{CARD} > .ipyagent-subagent > .ipyagent-subagent-blocks > .ipyagent-block"


def nested_kinds(page: Any) -> list[str]:
    kinds: list[str] = page.evaluate(
        f"() => Array.from(document.querySelectorAll('{NESTED}')).map(e => e.dataset.kind)"
    )
    return kinds


def subagent_open(page: Any) -> bool:
    return bool(page.evaluate(f"() => document.querySelector('{CARD} > .ipyagent-subagent').open"))


def test_the_sub_agent_s_work_is_nested_answered_folded_and_kept(page: Any, lab: Lab) -> None:
    name = write_notebook(
        lab,
        "subagent.ipynb",
        ["%load_ext ipyagent", SETUP, "%%agent -m m --context none --tools python,delegate\nSet x."],
    )
    open_notebook(page, lab, name)
    run_all(page)

    # The user folds the sub-agent's section while it works...
    page.locator(f"{NESTED}[data-kind=text]").first.wait_for(timeout=60_000)
    assert subagent_open(page)
    page.locator(f"{CARD} > .ipyagent-subagent > summary").first.click()
    assert not subagent_open(page)
    # ...and its run_python's permission prompt opens it again: it waits for the user.
    allow = page.locator(f"{NESTED} button[data-action=allow]").first
    allow.wait_for(state="visible", timeout=60_000)
    screenshot(page, "subagent", "1-nested-permission")
    assert cell_running(page, 2)
    assert subagent_open(page)
    assert nested_kinds(page)[:2] == ["text", "tool"]
    top_level = page.locator(".ipyagent-run .ipyagent-live > .ipyagent-block")
    assert [top_level.nth(i).get_attribute("data-kind") for i in range(top_level.count())] == ["text", "tool"]
    allow.click()

    wait_cell_done(page, 2)
    screenshot(page, "subagent", "2-done")
    assert nested_kinds(page) == ["text", "tool", "tool", "text"]
    nested_tools = page.locator(f"{NESTED}[data-kind=tool]")
    assert [nested_tools.nth(i).get_attribute("data-status") for i in range(2)] == ["done", "done"]
    card = page.locator(CARD).first
    assert card.get_attribute("data-status") == "done"
    assert page.locator(f"{CARD} > .ipyagent-subagent").get_attribute("data-status") == "completed"
    summary = page.locator(f"{CARD} > .ipyagent-subagent > summary").first
    assert summary.inner_text().startswith("Sub-agent · done · scripted/script")
    # Done, it folds; a click opens it again.
    assert not subagent_open(page)
    summary.click()
    assert subagent_open(page)
    screenshot(page, "subagent", "3-opened")
    # The parent's answer follows the card, at the top level.
    assert "Done: the sub-agent set x to 42." in page.locator(".ipyagent-run .ipyagent-live").inner_text()

    # Saved and reloaded: the same nesting, from the state the kernel wrote.
    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    time.sleep(1.0)
    page.reload()
    open_notebook(page, lab, name)
    page.locator(NESTED).first.wait_for(state="attached", timeout=30_000)  # folded: done
    assert not subagent_open(page)
    assert nested_kinds(page) == ["text", "tool", "tool", "text"]
    screenshot(page, "subagent", "4-reloaded")
