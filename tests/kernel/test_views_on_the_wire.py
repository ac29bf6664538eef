"""What a ``%%agent`` cell's view sends to a notebook page, in a real kernel: a small module per
view, the front-end runtime once per page (even while the cell blocks), the run's text once, and
the whole final state kept for a page that loads later (docs/widget-protocol.md).

The test plays the page's part as JupyterLab does: comm messages on a subshell where the kernel
has them (ipykernel 7), else on the shell (ipykernel 6, where the waiting cell pumps them)."""

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

    def run(self, code: str, on_open: Any = None, settle: float = 1.0) -> list[dict[str, Any]]:
        """Run a cell; its iopub messages and the replies to this page's messages, in order,
        each with ``during`` (True while the cell still ran)."""
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
            if msg["msg_type"] == "comm_open" and on_open is not None:
                on_open(msg["content"])
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
    opens: list[dict[str, Any]] = []

    def opened(content: dict[str, Any]) -> None:
        opens.append(content)
        if content["data"]["state"].get("_anywidget_id") == VIEW:
            for round_ in (1, 1, 1, 2):  # repeated, as a page does until answered; then a new round
                page.custom(content["comm_id"], {"action": "runtime", "page": "p", "round": round_})

    seen = page.run("%%agent -m m\nGo.", opened)
    [view] = [o for o in opens if o["data"]["state"].get("_anywidget_id") == VIEW]
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


def test_with_no_page_the_final_state_is_sent_for_nbclient_to_keep(kernel: Kernel) -> None:
    kernel.run(SETUP + f"m = ScriptedModel([[text({WORDS!r})]], chunk_size=50)")
    page = Page(kernel)  # present, but it never answers the view
    seen = page.run("%%agent -m m\nGo.", settle=0.2)
    assert text_of(state_updates(seen)[-1]) == WORDS
