"""The views' runtime in a real JupyterLab: a page loads it once, however many views it shows and in
whatever order they render, and loads it again after a reload (docs/widget-protocol.md)."""

from __future__ import annotations

from typing import Any

from conftest import Lab, open_notebook, run_all, screenshot, wait_cell_done, write_notebook

from ipyagent.widgets.runtime import runtime

SETUP = """
%load_ext ipyagent
from ipyagent.testing import ScriptedModel, text
from ipyagent.widgets import RunView
m = ScriptedModel(["First answer.", "Second answer."], chunk_size=4, delay=0.01)
"""
# Two views created before either is shown, then shown in the reverse order: their models
# initialize in one order and their views render in the other.
CELLS = [
    SETUP,
    "%%agent -m m\nOne?",
    "%%agent -m m\nTwo?",
    "early, late = RunView(), RunView()",
    "late",
    "early",
]
TEXT = ".ipyagent-run .ipyagent-block[data-kind=text]"
# Only the runtime has DOMPurify in it: a frame carrying it is the runtime going over the wire.
RUNTIME_MARK = b"DOMPurify"
PAGE_STATS = """() => {
    const loaders = globalThis[Symbol.for("ipyagent.runtimes")];
    return loaders ? [...loaders.values()].map((l) => ({ hash: l.hash, ...l.stats })) : [];
}"""


class Wire:
    """Counts the runtime's copies among the frames the page's websockets receive."""

    def __init__(self, page: Any) -> None:
        self.copies: list[int] = []
        self.largest_other = 0
        page.on("websocket", self._watch)

    def _watch(self, ws: Any) -> None:
        ws.on("framereceived", self._frame)

    def _frame(self, payload: Any) -> None:
        data = payload if isinstance(payload, bytes) else str(payload).encode()
        if RUNTIME_MARK in data:
            self.copies.append(len(data))
        else:
            self.largest_other = max(self.largest_other, len(data))


def shown_views(page: Any) -> int:
    count: int = page.locator(".ipyagent-run").count()
    return count


def test_a_page_loads_the_runtime_once_and_again_after_a_reload(page: Any, lab: Lab) -> None:
    digest, code = runtime()
    wire = Wire(page)
    name = write_notebook(lab, "runtime.ipynb", CELLS)
    open_notebook(page, lab, name)
    run_all(page)
    wait_cell_done(page, len(CELLS) - 1)
    page.locator(TEXT).nth(1).wait_for(timeout=30_000)
    page.wait_for_function("() => document.querySelectorAll('.ipyagent-run').length === 4", timeout=30_000)
    screenshot(page, "runtime", "1-four-views")

    texts = page.locator(TEXT).all_inner_texts()
    assert [t.strip() for t in texts] == ["First answer.", "Second answer."]
    # The views said hello in time, while the runtime was on its way: the run's text was not
    # written a second time as an ordinary output (what a run with no front end gets).
    assert page.get_by_text("First answer.", exact=True).count() == 1
    assert len(wire.copies) == 1, f"the runtime went over the websocket {len(wire.copies)} times"
    assert len(code) <= wire.copies[0] < len(code) + 2_000, "as raw bytes, not escaped JSON"
    assert wire.largest_other < 20_000, "no other message carries the views' code"
    [stats] = page.evaluate(PAGE_STATS)
    # The request may be repeated (a comm's first messages can wait behind the running cell); the
    # kernel answers it once.
    assert stats["requests"] >= 1
    assert {k: stats[k] for k in ("hash", "answers", "bytes", "loads")} == {
        "hash": digest, "answers": 1, "bytes": len(code), "loads": 1,
    }  # fmt: skip

    # Reloaded: a new page, an empty registry; it asks once more and every view comes back whole.
    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty")
    wire.copies.clear()
    page.reload()
    open_notebook(page, lab, name)
    page.wait_for_function("() => document.querySelectorAll('.ipyagent-run').length === 4", timeout=30_000)
    page.locator(TEXT).nth(1).wait_for(timeout=30_000)
    assert [t.strip() for t in page.locator(TEXT).all_inner_texts()] == ["First answer.", "Second answer."]
    assert len(wire.copies) == 1
    assert [(s["answers"], s["loads"]) for s in page.evaluate(PAGE_STATS)] == [(1, 1)]
    # The stylesheet came with the runtime: the views are styled.
    assert page.evaluate("() => Boolean(document.getElementById('ipyagent-style'))")
    assert (
        page.locator(".ipyagent-run .ipyagent-footer").first.evaluate("(el) => getComputedStyle(el).display")
        == "flex"
    )
    screenshot(page, "runtime", "2-reloaded")
