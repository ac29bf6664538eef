"""The chat's history in Chromium, without JupyterLab: the bundled chat view (in runtime.js)
given a stand-in for the anywidget model holding what the kernel would send
(docs/widget-protocol.md). A long history shows its latest blocks at once and the older ones page
by page as the user scrolls up, without moving what the user is looking at; a new turn restyles
its own blocks, not the history above them."""

from __future__ import annotations

import json
from typing import Any

from ipyagent.widgets.views import STATIC

ORIGIN = "http://chat.invalid"
PAGE = """<!doctype html><html><head><meta charset="utf-8">
</head><body><div id="out" style="width:800px"></div><script type="module">
import { views } from "/runtime.js";
const chat = views.chat;
const data = await (await fetch("/data.json")).json();
const handlers = new Map();
window.model = {
  values: data,
  get: (key) => window.model.values[key],
  on: (event, fn) => handlers.set(event, [...(handlers.get(event) || []), fn]),
  off: () => {},
  send: () => {},
  emit: (event, ...args) => (handlers.get(event) || []).forEach((fn) => fn(...args)),
};
chat.render({ model: window.model, el: document.getElementById("out") });
window.ready = true;
</script></body></html>"""


def history(count: int) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for i in range(count):
        if i % 3 == 0:
            blocks.append({"id": f"h{i}.0", "kind": "user", "text": f"question {i}"})
        elif i % 3 == 1:
            blocks.append({"id": f"h{i}.0", "kind": "text", "text": f"Answer **{i}**.", "streaming": False})
        else:
            blocks.append({
                "id": f"call_{i}", "kind": "tool", "name": "write", "args": "{}",
                "status": "denied" if i == count - 1 else "done", "duration": None,
                "result": "no", "display": None, "permission": False,
            })  # fmt: skip
    return blocks


def open_chat(page: Any, blocks: list[dict[str, Any]]) -> None:
    state = {"seq": 0, "status": "idle", "model": "", "blocks": [], "usage": None, "live": False}
    files = {
        "/": ("text/html", PAGE),
        "/runtime.js": ("text/javascript", (STATIC / "runtime.js").read_text()),
        "/data.json": ("application/json", json.dumps({"state": state, "history": blocks, "models": []})),
    }
    page.route(
        f"{ORIGIN}/**",
        lambda route: route.fulfill(
            status=200,
            content_type=files[route.request.url[len(ORIGIN) :] or "/"][0],
            body=files[route.request.url[len(ORIGIN) :] or "/"][1],
        ),
    )
    page.goto(f"{ORIGIN}/")
    page.wait_for_function("() => window.ready === true")


def shown_ids(page: Any) -> list[str]:
    ids: list[str] = page.evaluate(
        "() => [...document.querySelectorAll('.ipyagent-block')].map((el) => el.dataset.id)"
    )
    return ids


def test_a_long_history_opens_on_its_latest_blocks_and_pages_in_the_rest(page: Any) -> None:
    blocks = history(3000)
    open_chat(page, blocks)
    first = shown_ids(page)
    assert 0 < len(first) < 500, "the open draws a few pages, not the whole history"
    assert first == [b["id"] for b in blocks[-len(first) :]], "the latest blocks, in order"
    badge = page.locator(".ipyagent-block[data-id=call_2999] .ipyagent-badge")
    assert badge.inner_text() == "denied"
    scroller = ".ipyagent-chat .ipyagent-blocks"
    assert page.evaluate(
        f"() => {{ const s = document.querySelector('{scroller}'); "
        "return s.scrollHeight - s.scrollTop - s.clientHeight < 2; }"
    ), "the view starts at the bottom"

    # Scroll to the top again and again: each time older blocks go in above, and the block the
    # user was looking at stays where it was on the screen.
    for _ in range(200):
        if len(shown_ids(page)) == len(blocks):
            break
        top_id, before = page.evaluate(
            f"""() => {{
                const s = document.querySelector('{scroller}');
                s.scrollTop = 0;
                const el = document.querySelector('.ipyagent-block');
                return [el.dataset.id, el.getBoundingClientRect().top];
            }}"""
        )
        page.wait_for_function(
            f"() => document.querySelector('.ipyagent-block').dataset.id !== '{top_id}'", timeout=10_000
        )
        after = page.evaluate(
            "(id) => document.querySelector(`.ipyagent-block[data-id='${id}']`).getBoundingClientRect().top",
            top_id,
        )
        assert abs(after - before) < 2, f"the view jumped by {after - before:.0f} px"
    assert shown_ids(page) == [b["id"] for b in blocks], "every block once, in order"
    assert page.locator(".ipyagent-history-more").is_hidden()


def test_a_new_turn_goes_after_the_history(page: Any) -> None:
    open_chat(page, history(300))
    page.evaluate(
        """() => window.model.emit("msg:custom", {kind: "patches", seq: 1, patches: [
            {op: "add", block: {id: "u0", kind: "user", text: "and now?"}},
            {op: "add", block: {id: "r1.0.0", kind: "text", text: "Now.", streaming: false}},
        ]})"""
    )
    page.wait_for_function("() => document.querySelector('.ipyagent-chat').dataset.seq === '1'")
    assert shown_ids(page)[-2:] == ["u0", "r1.0.0"]


def caret(page: Any, block_id: str) -> str:
    """The content of the streaming caret after the block's text ("none" when there is none)."""
    content: str = page.evaluate(
        """(id) => {
            const tail = document.querySelector(`.ipyagent-block[data-id='${id}'] .ipyagent-md-tail`);
            const at = tail.lastElementChild || tail;
            return getComputedStyle(at, "::after").content;
        }""",
        block_id,
    )
    return content


def elements_restyled(page: Any, script: str) -> int:
    """How many elements Chromium restyled while ``script`` ran and the page drew its result
    (UpdateLayoutTree's elementCount in a trace of the page's main thread)."""
    cdp = page.context.new_cdp_session(page)
    events: list[dict[str, Any]] = []
    cdp.on("Tracing.dataCollected", lambda event: events.extend(event["value"]))
    done: dict[str, Any] = {}
    cdp.on("Tracing.tracingComplete", lambda event: done.update(event))
    cdp.send("Tracing.start", {"traceConfig": {"includedCategories": ["devtools.timeline"]}})
    page.evaluate(script)
    page.evaluate("() => new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)))")
    page.evaluate("() => document.body.getBoundingClientRect()")
    cdp.send("Tracing.end")
    while not done:  # waiting lets the session deliver the trace
        page.wait_for_timeout(50)
    cdp.detach()
    restyles = [e for e in events if e.get("name") == "UpdateLayoutTree"]
    return sum(e.get("args", {}).get("elementCount", 0) for e in restyles)


def test_the_caret_shows_while_a_turn_streams_and_its_status_restyles_only_the_turn(page: Any) -> None:
    open_chat(page, history(3000))
    # The open draws the latest pages, then more while the page is idle, up to IDLE_BLOCKS (200)
    # in js/src/history.js: on a busy machine that takes a while. Wait for all of them, so the
    # history a restyle would cost is there to count.
    page.wait_for_function("() => document.querySelectorAll('.ipyagent-block').length >= 200")
    page.evaluate(
        """() => window.model.emit("msg:custom", {kind: "patches", seq: 1, patches: [
            {op: "top", fields: {status: "running"}},
            {op: "add", block: {id: "u0", kind: "user", text: "and now?"}},
            {op: "add", block: {id: "r1.0.0", kind: "text", text: "Now", streaming: true}},
        ]})"""
    )
    page.wait_for_function("() => document.querySelector('.ipyagent-chat').dataset.seq === '1'")
    assert caret(page, "r1.0.0") == '"▍"', "streaming text ends in a caret while the run runs"
    shown = page.evaluate("() => document.getElementsByTagName('*').length")
    assert shown > 1000, "enough history is drawn for a restyle of it to show"

    # The run stops with the block still marked as streaming (a stopped run): the caret goes.
    restyled = elements_restyled(
        page,
        """() => window.model.emit("msg:custom", {kind: "patches", seq: 2, patches: [
            {op: "top", fields: {status: "cancelled"}},
        ]})""",
    )
    page.wait_for_function("() => document.querySelector('.ipyagent-chat').dataset.seq === '2'")
    assert caret(page, "r1.0.0") == "none"
    assert restyled < 100, f"the status change restyled {restyled} of {shown} elements"
