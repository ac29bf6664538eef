"""The live-notebook channel in a real kernel, with a page played by a Jupyter client.

The "page" speaks the protocol of labext/ over real comm messages, the way JupyterLab sends
them: on a kernel subshell where the kernel has them (ipykernel 7), on the main shell otherwise
(ipykernel 6, where the waiting cell pumps them). It answers the kernel's requests while the
cell that asked is still running: the one thing the channel must do. The browser test
(tests/browser/test_live_notebook.py) checks the real extension does the same.
"""

from __future__ import annotations

import uuid
from typing import Any

from conftest import Kernel, text_of

from ipyagent.kernel.live_protocol import ANNOUNCE_TARGET, PROTOCOL, TARGET

SNAPSHOT = {
    "path": "work/analysis.ipynb",
    "dirty": True,
    "cells": [
        {"id": "c1", "cell_type": "markdown", "source": "# Sales", "execution_count": None, "outputs": []},
        {
            "id": "c2",
            "cell_type": "code",
            "source": "total = 1 + 1  # typed, not saved",
            "execution_count": 4,
            "running": False,
            "outputs": [{"type": "error", "ename": "NameError", "evalue": "x", "traceback": "..."}],
        },
        {"id": "c3", "cell_type": "code", "source": "live_document()", "running": True, "outputs": []},
    ],
    "active_cell_id": "c2",
    "selected_cell_ids": ["c2"],
}


class Page:
    """A page with ipyagent's extension, connected to ``kernel``."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.kc = kernel.kc
        self.comm_id = uuid.uuid4().hex
        self.subshell: str | None = None
        self.requests: list[dict[str, Any]] = []
        self.answer: Any = SNAPSHOT  # what read_notebook answers; None: stay silent
        self.received: list[dict[str, Any]] = []
        self.closed: set[str] = set()
        self.kc.kernel_info()
        info = self.kc.get_shell_msg(timeout=30)["content"]
        if "kernel subshells" in info.get("supported_features", []):
            msg = self.kc.session.msg("create_subshell_request", {})
            self.kc.control_channel.send(msg)
            self.subshell = self.kc.get_control_msg(timeout=30)["content"]["subshell_id"]

    def send_shell(self, msg_type: str, content: dict[str, Any]) -> None:
        msg = self.kc.session.msg(msg_type, content)
        if self.subshell is not None:
            msg["header"]["subshell_id"] = self.subshell
        self.kc.shell_channel.send(msg)

    def announced(self) -> bool:
        """What the page asks a kernel it connects to: is ipyagent loaded there?"""
        msg_id = self.kc.comm_info(target_name=ANNOUNCE_TARGET)
        while True:
            reply = self.kc.get_shell_msg(timeout=30)
            if reply["parent_header"].get("msg_id") == msg_id:
                return bool(reply["content"]["comms"])

    def open(self, protocol: int = PROTOCOL, version: str = "0.1.0") -> None:
        hello = {"kind": "hello", "protocol": protocol, "version": version}
        hello |= {"client": "TestLab 4", "path": "a.ipynb"}
        self.send_shell("comm_open", {"comm_id": self.comm_id, "target_name": TARGET, "data": hello})

    def close(self) -> None:
        self.send_shell("comm_close", {"comm_id": self.comm_id, "data": {}})

    def handle(self, msg: dict[str, Any]) -> None:
        kind, content = msg["msg_type"], msg["content"]
        if kind == "comm_close":
            self.closed.add(content["comm_id"])
        if kind != "comm_msg" or content["comm_id"] != self.comm_id:
            return
        data = content["data"]
        self.received.append(data)
        if data["kind"] != "request":
            return
        self.requests.append(data)
        if self.answer is None:
            return
        result = self.answer if data["method"] == "read_notebook" else {}
        reply = {"kind": "response", "id": data["id"], "ok": True, "result": result}
        self.send_shell("comm_msg", {"comm_id": self.comm_id, "data": reply})

    def run(self, code: str, timeout: float = 60) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Run a cell, answering the kernel's requests meanwhile; its reply and outputs."""
        msg_id = self.kernel.send(code)
        outputs: list[dict[str, Any]] = []
        while True:
            msg = self.kc.get_iopub_msg(timeout=timeout)
            self.handle(msg)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "status" and content["execution_state"] == "idle":
                break
            if kind in ("stream", "error", "execute_result", "display_data"):
                outputs.append({"type": kind, **content})
        while True:
            reply = self.kc.get_shell_msg(timeout=timeout)
            if reply["parent_header"].get("msg_id") == msg_id:
                return reply["content"], outputs

    def settle(self) -> None:
        """Handle what the kernel sent since (a welcome, a mismatch) by running an empty cell."""
        self.run("pass")


def test_a_page_is_welcomed_and_read_while_the_asking_cell_runs(kernel: Kernel) -> None:
    page = Page(kernel)
    assert not page.announced(), "announced before %load_ext"
    reply, _ = page.run("%load_ext ipyagent")
    assert reply["status"] == "ok"
    assert page.announced()
    page.open()
    page.settle()
    assert page.received[0]["kind"] == "welcome" and page.received[0]["protocol"] == PROTOCOL

    reply, outputs = page.run(
        "from ipyagent.kernel.live_notebook import live_document\n"
        "doc = live_document()\n"
        "print(repr(doc.active_cell.source), doc.dirty, doc.client)\n"
        "print([c.id for c in doc.selected_cells], [c.id for c in doc.running_cells],"
        " doc.last_failed_cell.id)"
    )
    assert reply["status"] == "ok", text_of(outputs)
    assert text_of(outputs).splitlines() == [
        "'total = 1 + 1  # typed, not saved' True TestLab 4",
        "['c2'] ['c3'] c2",
    ]
    assert [r["method"] for r in page.requests] == ["read_notebook"]
    assert page.requests[0]["params"] == {"max_output_chars": 2000}


def test_a_page_with_another_protocol_is_told_what_to_do(kernel: Kernel) -> None:
    page = Page(kernel)
    page.run("%load_ext ipyagent")
    page.open(protocol=PROTOCOL + 1, version="9.0.0")
    page.settle()
    mismatch = page.received[0]
    assert mismatch["kind"] == "mismatch" and mismatch["protocol"] == PROTOCOL
    assert "Restart the kernel" in mismatch["message"]

    reply, outputs = page.run("from ipyagent.kernel.live_notebook import live_document\nlive_document()")
    assert reply["status"] == "error"
    shown = text_of(outputs)
    assert "LiveNotebookMismatch" in shown
    assert f"older than the page's extension (9.0.0, protocol {PROTOCOL + 1})" in shown
    assert "Restart the kernel" in shown
    assert page.requests == [], "a page speaking another protocol was sent a request"

    old = Page(kernel)
    old.open(protocol=PROTOCOL - 1, version="0.0.1")
    old.settle()
    assert "Reload the page" in old.received[0]["message"]


def test_without_a_page_there_is_no_live_document(kernel: Kernel) -> None:
    reply, outputs = kernel.run(
        "%load_ext ipyagent\n"
        "from ipyagent.kernel.live_notebook import live_document\n"
        "from ipyagent.kernel.extension import kernel_state\n"
        "print(live_document())\n"
        "print(kernel_state(get_ipython()).live.state().reason)"
    )
    assert reply["status"] == "ok", text_of(outputs)
    none, reason = text_of(outputs).strip().splitlines()
    assert none == "None"
    assert "no page shows this notebook" in reason and "nbclient" in reason


def test_a_closed_page_is_forgotten_and_a_silent_one_times_out(kernel: Kernel) -> None:
    page = Page(kernel)
    page.run("%load_ext ipyagent\nfrom ipyagent.kernel.live_notebook import live_document")
    page.open()
    page.settle()
    page.answer = None
    reply, outputs = page.run("live_document(timeout=0.5)")
    assert reply["status"] == "error"
    assert "PageTimeout" in text_of(outputs) and "did not answer within 0.5 s" in text_of(outputs)

    page.close()
    page.settle()
    _, outputs = page.run("print(live_document())")
    assert text_of(outputs).strip() == "None"


def test_unloading_closes_the_channel_and_loading_announces_again(kernel: Kernel) -> None:
    page = Page(kernel)
    page.run("%load_ext ipyagent")
    page.open()
    page.settle()
    page.run("%unload_ext ipyagent")
    assert page.comm_id in page.closed
    assert not page.announced()
    page.run("%load_ext ipyagent")
    assert page.announced()
