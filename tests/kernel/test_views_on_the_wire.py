"""What a ``%%agent`` cell's view sends to a notebook page, in a real kernel: a small module per
view, the front-end runtime once per page (even while the cell blocks), the run's text once, and
the whole final state kept for a page that loads later (docs/widget-protocol.md).

The test plays the page's part as JupyterLab does: it renders a view when the view is displayed,
and sends comm messages on a subshell where the kernel has them (ipykernel 7), else on the shell
(ipykernel 6, where the waiting cell pumps them)."""

from __future__ import annotations

import json
import re
import time
from typing import Any

from conftest import Kernel

from ipyagent.widgets.runtime import runtime

SETUP = "%load_ext ipyagent\nfrom ipyagent.testing import ScriptedModel, text\n"
VIEW = "ipyagent.widgets.views.RunView"
WORDS = " ".join(f"w{i}" for i in range(300))


class Page:
    """A notebook page's side of the views' comms."""

    def __init__(self, kernel: Kernel) -> None:
        self.kc = kernel.kc
        self.subshell: str | None = None
        info = self.kc.kernel_info(reply=True, timeout=30)["content"]
        if "kernel subshells" in info.get("supported_features", []):
            self.kc.control_channel.send(self.kc.session.msg("create_subshell_request", {}))
            self.subshell = self.kc.get_control_msg(timeout=30)["content"]["subshell_id"]
        self.sent: set[str] = set()

    def custom(self, comm_id: str, content: dict[str, Any]) -> None:
        self.send(comm_id, {"method": "custom", "content": content})

    def send(self, comm_id: str, data: dict[str, Any]) -> None:
        msg = self.kc.session.msg("comm_msg", {"comm_id": comm_id, "data": data})
        if self.subshell is not None:
            msg["header"]["subshell_id"] = self.subshell
        self.sent.add(msg["header"]["msg_id"])
        self.kc.shell_channel.send(msg)

    def run(self, code: str, on_view: Any = None, settle: float = 1.0) -> list[dict[str, Any]]:
        """Run a cell, calling ``on_view(comm_id, comm_open)`` when a run view is displayed;
        return its iopub messages and the replies to this page's messages, in order, each with
        ``during`` (True while the cell still ran)."""
        opened: dict[str, dict[str, Any]] = {}
        msg_id = self.kc.execute(code)
        seen: list[dict[str, Any]] = []
        running, until = True, float("inf")
        while time.monotonic() < until:
            try:
                msg = self.kc.get_iopub_msg(timeout=60 if running else max(until - time.monotonic(), 0.01))
            except Exception:  # queue.Empty: nothing more came while settling
                break
            parent = msg["parent_header"].get("msg_id")
            if parent != msg_id and parent not in self.sent:
                continue
            msg["during"] = running
            seen.append(msg)
            content = msg["content"]
            widget = (content.get("data") or {}).get("state") or {}
            if msg["msg_type"] == "comm_open" and widget.get("_anywidget_id") == VIEW:
                opened[content["comm_id"]] = content
            shown = (content.get("data") or {}).get("application/vnd.jupyter.widget-view+json")
            if msg["msg_type"] == "display_data" and shown and on_view is not None:
                on_view(shown["model_id"], opened[shown["model_id"]])
            idle = msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle"
            if parent == msg_id and idle:
                running, until = False, time.monotonic() + settle
        while self.kc.get_shell_msg(timeout=60)["parent_header"].get("msg_id") != msg_id:
            pass
        return seen

    def settle(self, seconds: float = 1.0) -> list[dict[str, Any]]:
        """The replies to this page's messages that come within ``seconds``."""
        got, until = [], time.monotonic() + seconds
        while time.monotonic() < until:
            try:
                msg = self.kc.get_iopub_msg(timeout=max(until - time.monotonic(), 0.01))
            except Exception:
                break
            if msg["parent_header"].get("msg_id") in self.sent:
                got.append(msg)
        return got


def custom(msg: dict[str, Any]) -> dict[str, Any]:
    data = msg["content"].get("data") or {}
    if msg["msg_type"] != "comm_msg" or data.get("method") != "custom":
        return {}
    content: dict[str, Any] = data.get("content") or {}
    return content


def state_updates(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        m["content"]["data"]["state"]["state"]
        for m in messages
        if m["msg_type"] == "comm_msg"
        and m["content"]["data"].get("method") == "update"
        and "state" in m["content"]["data"].get("state", {})
    ]


def text_of(state: dict[str, Any]) -> str:
    return "".join(b.get("text", "") for b in state["blocks"] if b["kind"] == "text")


def test_a_view_opens_small_and_the_page_gets_the_runtime_once_while_the_cell_runs(kernel: Kernel) -> None:
    kernel.run(SETUP + f"m = ScriptedModel([[text({WORDS!r})]], chunk_size=8, delay=0.01)")
    page = Page(kernel)
    views: list[dict[str, Any]] = []

    def shown(comm_id: str, opened: dict[str, Any]) -> None:
        views.append(opened)
        for round_ in (1, 1, 1, 2):  # repeated, as a page does until answered; then a new round
            page.custom(comm_id, {"action": "runtime", "page": "p", "round": round_})

    seen = page.run("%%agent -m m\nGo.", shown)
    [view] = views
    esm = view["data"]["state"]["_esm"]
    assert len(json.dumps(view)) < 10_000, "the view's comm_open carries a loader, not the views' code"
    assert "_css" not in view["data"]["state"], "the stylesheet comes with the runtime"
    assert "DOMPurify" not in esm

    answers = [m for m in seen if custom(m).get("kind") == "runtime"]
    digest, code = runtime()
    assert len(answers) == 2, "one answer per round of a page, however often it asked"
    assert all(m["during"] for m in answers), "answered while the %%agent cell was running"
    assert [custom(m)["hash"] for m in answers] == [digest, digest]
    assert [bytes(m["buffers"][0]) for m in answers] == [code, code], "the code as a binary buffer"
    assert re.search(rf'"{digest}"', esm), "the loader asks for the runtime this kernel has"


def test_with_a_page_the_run_s_text_goes_once_and_the_final_state_stays_in_the_kernel(kernel: Kernel) -> None:
    kernel.run(SETUP + f"m = ScriptedModel([[text({WORDS!r})]], chunk_size=8, delay=0.005)")
    page = Page(kernel)
    views: list[str] = []

    def shown(comm_id: str, opened: dict[str, Any]) -> None:
        views.append(comm_id)
        page.custom(comm_id, {"action": "sync", "seq": opened["data"]["state"]["state"].get("seq", 0)})
        page.custom(comm_id, {"action": "hello"})

    seen = page.run("%%agent -m m\nGo.", shown)
    [comm_id] = views
    appended = "".join(
        p.get("value", "")
        for m in seen
        for p in custom(m).get("patches", [])
        if p["op"] == "append" and p["field"] == "text"
    )
    assert appended == WORDS, "the patches carry the text"
    assert all(WORDS not in text_of(s) for s in state_updates(seen)), "...and nothing sends it again"
    assert not [m for m in seen if m["msg_type"] == "display_data" and WORDS in json.dumps(m["content"])]

    # A page loaded now (a reload) asks for the view's state: the kernel kept the final one.
    page.send(comm_id, {"method": "request_state"})
    [reloaded] = state_updates(page.settle())
    assert text_of(reloaded) == WORDS
    assert reloaded["status"] == "completed"
    final = reloaded["seq"]

    # A page that missed patches says how far it got and gets the whole state, once; a page that
    # has everything gets nothing.
    page.custom(comm_id, {"action": "sync", "seq": final - 2})
    [whole] = state_updates(page.settle())
    assert whole == reloaded
    page.custom(comm_id, {"action": "sync", "seq": final})
    page.custom(comm_id, {"action": "sync", "seq": final - 2})  # the whole state is on its way
    assert state_updates(page.settle()) == []


def test_with_no_page_the_final_state_is_sent_for_nbclient_to_keep(kernel: Kernel) -> None:
    kernel.run(SETUP + f"m = ScriptedModel([[text({WORDS!r})]], chunk_size=50)")
    page = Page(kernel)  # present, but it never answers the view
    seen = page.run("%%agent -m m\nGo.", settle=0.2)
    assert text_of(state_updates(seen)[-1]) == WORDS
