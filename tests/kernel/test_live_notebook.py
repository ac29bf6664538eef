"""The live-notebook channel in a real kernel, with a page played by a Jupyter client.

The "page" speaks the protocol of labext/ over real comm messages, the way JupyterLab sends
them: on a kernel subshell where the kernel has them (ipykernel 7), on the main shell otherwise
(ipykernel 6, where the waiting cell pumps them). It answers the kernel's requests while the
cell that asked is still running: the one thing the channel must do. The browser test
(tests/browser/test_live_notebook_in_lab.py) checks the real extension does the same.

The agent's ``read_cells`` reads the open document through it when a page is connected, and
the saved file, with exactly today's result, when none is.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nbformat
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
        self.answers: dict[str, Any] = {}  # what the other methods answer (default: {})
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
        result = {}
        if data["method"] == "read_notebook":
            result = self.answer(data["params"]) if callable(self.answer) else self.answer
        else:
            result = self.answers.get(data["method"], {})
        reply = {"kind": "response", "id": data["id"], "ok": True, "result": result}
        self.send_shell("comm_msg", {"comm_id": self.comm_id, "data": reply})

    def run(
        self, code: str, timeout: float = 60, *, cell_id: str | None = None
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Run a cell, answering the kernel's requests meanwhile; its reply and outputs.
        ``cell_id``: the cell the request names, as JupyterLab's execute requests do."""
        if cell_id is None:
            msg_id = self.kernel.send(code)
        else:
            content = {"code": code, "silent": False, "store_history": True, "user_expressions": {}}
            content |= {"allow_stdin": False, "stop_on_error": True}
            msg = self.kc.session.msg("execute_request", content, metadata={"cellId": cell_id})
            self.kc.shell_channel.send(msg)
            msg_id = msg["header"]["msg_id"]
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


# -- read_cells on the live document -------------------------------------------------------------


def paged(doc: dict[str, Any]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """``read_notebook`` over ``doc`` (whole, as in SNAPSHOT) as labext/src/snapshot.js answers
    it: the range asked for, and where the notable cells are."""
    cells = doc["cells"]

    def answer(params: dict[str, Any]) -> dict[str, Any]:
        start = min(params.get("start", 0), len(cells))
        end = min(len(cells), start + params.get("limit", len(cells)))
        budget, used, chosen = params.get("page_chars", math.inf), 0, []
        for cell in cells[start:end]:
            chars = len(cell["source"]) + 100
            if chosen and used + chars > budget:
                break
            chosen.append(cell)
            used += chars
        running = [c["id"] for c in cells if c.get("running")]
        failed = [
            (c["execution_count"], c["id"])
            for c in cells
            if c.get("execution_count") and any(o["type"] == "error" for o in c["outputs"])
        ]
        last_failed = max(failed)[1] if failed else None
        named = {doc["active_cell_id"], *doc["selected_cell_ids"], *running, last_failed} - {None}
        where = {c["id"]: i for i, c in enumerate(cells)}
        return {
            **doc,
            "start": start,
            "total": len(cells),
            "cells": chosen,
            "running_cell_ids": running,
            "last_failed_cell_id": last_failed,
            "index_of": {cell_id: where[cell_id] for cell_id in named},
        }

    return answer


#: A %%agent cell whose model calls read_cells once.
AGENT = "%%agent -m m --quiet -o res --tools notebook\nRead my notebook."
READ_BY_THE_AGENT = (
    "from ipyagent.testing import ScriptedModel, tool_call\n"
    "m = ScriptedModel([[tool_call('read_cells', {})], 'Read.'])"
)
#: Prints what read_cells gave the agent in the run stored in ``res``.
SHOW_RESULT = "print([b.content for m in res.messages for b in m.tool_results][0])"


def saved_notebook(folder: Path) -> Path:
    """analysis.ipynb as last saved: cell c2 without the edit the user has typed since."""
    nb = nbformat.v4.new_notebook()
    broken = nbformat.v4.new_code_cell("total = 1 + 1", id="c2", execution_count=4)
    broken.outputs = [nbformat.v4.new_output("error", ename="NameError", evalue="x", traceback=[])]
    nb.cells = [nbformat.v4.new_markdown_cell("# Sales", id="c1"), broken]
    path = folder / "analysis.ipynb"
    nbformat.write(nb, str(path))
    return path


def test_read_cells_reads_the_open_document_from_the_agents_cell(jupyter_env: Path) -> None:
    saved_notebook(jupyter_env)
    kernel = Kernel(jupyter_env, env={"JPY_SESSION_NAME": str(jupyter_env / "analysis.ipynb")})
    try:
        page = Page(kernel)
        page.run("%load_ext ipyagent\n" + READ_BY_THE_AGENT)
        page.open()
        page.settle()
        page.answer = paged(SNAPSHOT)
        # The request that runs the agent names its cell, c3, as JupyterLab's do.
        reply, outputs = page.run(AGENT, cell_id="c3")
        assert reply["status"] == "ok", text_of(outputs)
        _, outputs = page.run(SHOW_RESULT)
    finally:
        kernel.close()
    assert text_of(outputs).rstrip("\n") == (
        "(live document: work/analysis.ipynb as the user sees it now in TestLab 4, with unsaved changes; "
        "3 cells.\n"
        "This agent runs in cell [2] id=c3.\n"
        "The user is on cell [1] id=c2.\n"
        "Failed last: cell [1] id=c2 (NameError: x).)\n\n"
        "[0] id=c1 markdown\n# Sales\n\n"
        "[1] id=c2 code (ran as In [4]; the user's active cell; failed last)\n"
        "total = 1 + 1  # typed, not saved\n--- output ---\nNameError: x\nTraceback:\n...\n\n"
        "[2] id=c3 code (running; this agent's cell)\nlive_document()"
    )
    # The notebook's context for the prompt (the outline, no outputs), then the tool's read.
    context, tool = page.requests
    assert context["params"] == {"max_output_chars": 0, "page_chars": 20000}
    assert tool["params"] == {"max_output_chars": 1500, "start": 0, "page_chars": 20000}


def test_read_cells_asks_the_page_for_one_page_at_a_time(kernel: Kernel) -> None:
    # 400 cells of ~300 characters: about 160 KB, several pages. This kernel does not know its
    # notebook's file (no Jupyter server said): the open document is all there is.
    cells = [
        {"id": f"k{i}", "cell_type": "code", "source": f"v{i} = {i}  # " + "z" * 290, "outputs": []}
        for i in range(400)
    ]
    doc = {"path": "long.ipynb", "dirty": False, "cells": cells, "active_cell_id": "k390"}
    page = Page(kernel)
    page.run("%load_ext ipyagent")
    page.open()
    page.settle()
    page.answer = paged({**doc, "selected_cell_ids": ["k390"]})
    reply, outputs = page.run(
        "import json, re\n"
        "from ipyagent.kernel.extension import kernel_state\n"
        "from ipyagent.kernel.tools.notebook import notebook_tools\n"
        "state = kernel_state(get_ipython())\n"
        "tools = notebook_tools(get_ipython(), state.main, None, live=state.live)\n"
        "read = {t.name: t.function for t in tools}['read_cells']\n"
        "seen, arguments, pages = [], {}, []\n"
        "while True:\n"
        "    text = read(**arguments)\n"
        "    pages.append(len(text))\n"
        "    seen += [int(i) for i in re.findall(r'^\\[(\\d+)\\] id=', text, flags=re.MULTILINE)]\n"
        "    more = re.search(r'read_cells\\(start=(\\d+)\\)', text)\n"
        "    if more is None:\n"
        "        break\n"
        "    arguments = {'start': int(more.group(1))}\n"
        "print(json.dumps({'seen': seen, 'pages': pages, 'last': text.splitlines()[:2],\n"
        "                  'three': read(start=10, limit=3)}))"
    )
    assert reply["status"] == "ok", text_of(outputs)
    result = json.loads(text_of(outputs))
    assert result["seen"] == list(range(400))
    assert 5 <= len(result["pages"]) <= 12 and max(result["pages"]) < 30_000, result["pages"]
    assert result["last"] == [
        "(live document: long.ipynb as the user sees it now in TestLab 4, all saved; 400 cells.",
        "The user is on cell [390] id=k390.)",
    ]
    three = result["three"]
    heads = [line.split(" ")[0] for line in three.splitlines() if line.startswith("[")]
    assert heads == ["[10]", "[11]", "[12]"]
    assert three.endswith("(cells 10 to 12 of 400 cells shown; read on with read_cells(start=13))")
    # The page was asked for a range each time, never for the whole document.
    reads = [r["params"] for r in page.requests]
    assert all("page_chars" in params for params in reads)
    assert reads[-1] == {"max_output_chars": 1500, "start": 10, "limit": 3, "page_chars": 20000}


def test_without_a_page_read_cells_gives_the_saved_file_as_before(jupyter_env: Path) -> None:
    saved_notebook(jupyter_env)
    kernel = Kernel(jupyter_env, env={"JPY_SESSION_NAME": str(jupyter_env / "analysis.ipynb")})
    saved = (
        "[0] id=c1 markdown\n# Sales\n\n"
        "[1] id=c2 code (ran as In [4])\ntotal = 1 + 1\n--- output ---\nNameError: x"
    )
    try:
        page = Page(kernel)
        page.run("%load_ext ipyagent\n" + READ_BY_THE_AGENT)
        reply, outputs = page.run(AGENT)
        assert reply["status"] == "ok", text_of(outputs)
        _, outputs = page.run(SHOW_RESULT)
        # Byte for byte: recorded conversations replay only if it is unchanged.
        assert text_of(outputs).rstrip("\n") == saved

        # A page of another release: the saved file, and the first line says what to do.
        page.open(protocol=PROTOCOL + 1, version="9.0.0")
        page.settle()
        page.run("m = ScriptedModel([[tool_call('read_cells', {})], 'Read.'])")
        page.run(AGENT, cell_id="c2")
        _, outputs = page.run(SHOW_RESULT)
    finally:
        kernel.close()
    note, rest = text_of(outputs).rstrip("\n").split("\n\n", 1)
    assert note.startswith("(saved file, not the live document: Restart the kernel.")
    assert rest == saved
    assert page.requests == []
