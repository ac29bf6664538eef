"""The chat's history in Chromium, without JupyterLab: the bundled chat view (in runtime.js)
given a stand-in for the anywidget model holding what the kernel would send
(docs/widget-protocol.md). A long history shows its latest blocks at once and the older ones page
by page as the user scrolls up, without moving what the user is looking at."""

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
