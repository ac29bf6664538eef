"""An answer's claims marked in the %%agent run view in a real JupyterLab: a number a tool
output shows is underlined, its title naming the call and the output line; one no output
shows is in the warning colour, titled so. Screenshots in tests/browser/screenshots/claims/."""

from __future__ import annotations

import re
from typing import Any

from conftest import Lab, open_notebook, run_all, screenshot, wait_cell_done, write_notebook

SETUP = """
from ipyagent.testing import ScriptedModel, tool_call
import pandas as pd
df = pd.DataFrame({'x': [12.0, 13.0, 14.3]})
m = ScriptedModel([
    tool_call('run_python', {'code': 'df.x.mean()'}),
    'The mean of `x` is **13.1**, and its maximum is 15.',
])
"""

CLAIM = ".ipyagent-run .ipyagent-block[data-kind=text] .ipyagent-claim"


def marks(page: Any) -> list[dict[str, str]]:
    found: list[dict[str, str]] = page.evaluate(
        f"() => Array.from(document.querySelectorAll('{CLAIM}'))"
        ".map(e => ({text: e.textContent, traced: e.dataset.traced, title: e.title,"
        " color: getComputedStyle(e).color}))"
    )
    return found


def test_traced_and_untraced_claims_are_marked_in_the_answer(page: Any, lab: Lab) -> None:
    name = write_notebook(
        lab,
        "claims.ipynb",
        ["%load_ext ipyagent", SETUP, "%%agent -y --tools python -m m\nWhat are the mean and max of df.x?"],
    )
    open_notebook(page, lab, name)
    run_all(page)
    wait_cell_done(page, 2)
    page.locator(f"{CLAIM}[data-traced=false]").first.wait_for(timeout=30_000)
    shown = marks(page)
    assert [(m["text"], m["traced"]) for m in shown] == [("13.1", "true"), ("15", "false")]
    traced, untraced = shown
    # The call and the line of its output: the value as the kernel printed it (numpy 2 names
    # the type, numpy 1 did not).
    assert re.fullmatch(r"✓ From run_python \(call_\w+\): (np\.float64\()?13\.1\)?", traced["title"])
    assert untraced["title"] == "Not found in any tool output"
    assert traced["color"] != untraced["color"]  # the untraced number stands out
    page.locator(CLAIM).first.hover()
    screenshot(page, "claims", "1-marked")

    # Saved and reloaded: the marks come back from the state the kernel wrote.
    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    page.wait_for_timeout(1000)
    page.reload()
    open_notebook(page, lab, name)
    page.locator(f"{CLAIM}[data-traced=false]").first.wait_for(timeout=30_000)
    assert [(m["text"], m["traced"]) for m in marks(page)] == [("13.1", "true"), ("15", "false")]
