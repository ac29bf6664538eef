"""The kernel's half of the live-notebook protocol: the messages, typed, and the handshake rule.

The page's half is ``labext/src/protocol.js``; docs/live-notebook-protocol.md describes both.
Pure: no comm, no thread, no import beyond the standard library (``%load_ext`` imports this
module and must stay cheap). :mod:`.live_notebook` moves these messages over a comm.

The handshake: the page opens a comm to :data:`TARGET` with a :class:`Hello`; the kernel
answers :class:`Welcome` when both speak :data:`PROTOCOL`, else :class:`Mismatch` with what to
do (reload the page, restart the kernel), and never sends that page a request.
"""

from __future__ import annotations

from typing import Any, Final, Literal, TypedDict

from typing_extensions import NotRequired

__all__ = [
    "ANNOUNCE_TARGET",
    "PROTOCOL",
    "TARGET",
    "Announce",
    "CellOutputsParams",
    "DeleteOp",
    "EditOp",
    "EditParams",
    "Focus",
    "Hello",
    "InsertOp",
    "KernelMessage",
    "Method",
    "Mismatch",
    "MoveOp",
    "Notice",
    "PageMessage",
    "PageMethod",
    "PageRequest",
    "Provenance",
    "ReadNotebookParams",
    "ReplaceOp",
    "Request",
    "Response",
    "UndoEditParams",
    "UndoRunParams",
    "UndoVariablesParams",
    "Welcome",
    "answer_hello",
    "mismatch_message",
    "parse_page_message",
]

#: The protocol this kernel speaks. Bump it with any change a page of the previous release
#: would misread; ``labext/src/protocol.js`` says the same number (a test checks).
#: 2: ``read_notebook`` reads a range of cells (:class:`ReadNotebookParams`) and says where the
#: notable cells are; a page of protocol 1 would answer every cell and none of that.
#: 3: ``edit`` and ``undo_edit`` (:class:`EditParams`, :class:`UndoEditParams`) change the open
#: document; the kernel relies on them, so a page of protocol 2 is told to reload.
#: 4: ``undo_run`` (:class:`UndoRunParams`) undoes a run's changes (``%agent undo``).
#: 5: :class:`Notice` ``cell_outputs`` (:class:`CellOutputsParams`): a cell the agent runs shows
#: its outputs, running state and execution count; a page of protocol 4 would drop them.
#: 6: an edit's :class:`Provenance` may say ``fix`` (``%agent fix``): the page's Keep on it runs
#: the cell, and its Fix button on a failed cell runs ``%agent fix``; a page of protocol 5 would
#: show the fix as a plain edit, whose Keep does not run it. ``cell_outputs`` names its run, whose
#: undo puts back the outputs the cell had before.
#: 7: the page asks the kernel too (:class:`PageRequest`, answered by a :class:`Response`):
#: ``undo_variables`` (:class:`UndoVariablesParams`) after "Undo run" puts the run's variables
#: back; a kernel of protocol 6 would leave the page waiting.
PROTOCOL: Final = 7
#: The comm target this kernel registers at ``%load_ext``; the page opens its comm to it.
TARGET: Final = "ipyagent.notebook"
#: The comm target of the page: the kernel opens a comm to it to say that ipyagent is loaded,
#: and keeps it open so that a page that connects later finds it (comm_info).
ANNOUNCE_TARGET: Final = "ipyagent.notebook.announce"

Method = Literal["read_notebook", "ping", "edit", "undo_edit", "undo_run"]
#: What a page may ask the kernel.
PageMethod = Literal["undo_variables"]


# Page -> kernel.
class Hello(TypedDict):
    kind: Literal["hello"]
    protocol: int
    version: str
    #: The front end and its version, e.g. "JupyterLab 4.6.6".
    client: str
    #: The notebook's path, relative to the server's root.
    path: str | None


class Response(TypedDict):
    kind: Literal["response"]
    id: str
    ok: bool
    result: NotRequired[dict[str, Any]]
    error: NotRequired[str]


class Focus(TypedDict):
    """The user turned to this page's notebook: requests go to the page seen last."""

    kind: Literal["focus"]


class PageRequest(TypedDict):
    """The page asks the kernel; the kernel answers with a :class:`Response` of the same ``id``."""

    kind: Literal["request"]
    id: str
    method: PageMethod
    params: dict[str, Any]


class UndoVariablesParams(TypedDict):
    """``undo_variables``: put back the variables run ``run``'s code changed. The answer:
    ``run``, ``restored`` and ``removed`` (names), ``kept`` (``{name, why}``: a later run changed
    it too, or it was rebound since) and ``refused`` (why nothing was done, or "")."""

    run: str


PageMessage = Hello | Response | Focus | PageRequest


# Kernel -> page.
class Announce(TypedDict):
    kind: Literal["announce"]
    protocol: int
    version: str


class Welcome(TypedDict):
    kind: Literal["welcome"]
    protocol: int
    version: str


class Mismatch(TypedDict):
    kind: Literal["mismatch"]
    protocol: int
    version: str
    message: str


class Request(TypedDict):
    kind: Literal["request"]
    id: str
    method: Method
    params: dict[str, Any]


class Notice(TypedDict):
    """A message the page acts on and does not answer: the kernel sends it from code that cannot
    wait (a cell running on the main thread)."""

    kind: Literal["notice"]
    method: Literal["cell_outputs"]
    params: dict[str, Any]


class CellOutputsParams(TypedDict):
    """A cell the agent runs (``run_cell``): its outputs so far, in order."""

    cell_id: str
    #: Clear the cell's outputs and execution count first (the run's first notice).
    reset: bool
    #: Outputs to append, in nbformat's shape (consecutive streams merge, as in a cell the user runs).
    outputs: list[dict[str, Any]]
    #: True while it runs (the prompt shows ``[*]``); the last notice says False.
    running: bool
    #: Its execution count, on the last notice.
    execution_count: int | None
    #: The run that runs it: the page keeps the outputs the cell had before, for an undo of the run.
    run: NotRequired[str]


KernelMessage = Announce | Welcome | Mismatch | Request | Notice | Response


class ReadNotebookParams(TypedDict, total=False):
    """What ``read_notebook`` reads; without a bound, every cell."""

    #: Characters kept of each output (the tail of a stream or a traceback, the head of a result).
    max_output_chars: int
    #: Index of the first cell.
    start: int
    #: At most this many cells.
    limit: int
    #: At most about this many characters of sources and outputs, but always one cell.
    page_chars: int


# The ops of an edit. Cells are named by id; an insert or a move names the cell it goes after
# (None: the top), never an index, which shifts as the user works. Every op on an existing cell
# carries the source the agent expects there: one mismatch and the page applies nothing.
class ReplaceOp(TypedDict):
    op: Literal["replace"]
    cell_id: str
    expect: str
    source: str


class InsertOp(TypedDict):
    op: Literal["insert"]
    #: The cell it goes after; None: the top; left out: the end.
    after_id: NotRequired[str | None]
    cell_type: Literal["code", "markdown", "raw"]
    source: str
    #: An id the kernel suggests; the page picks another if it is taken.
    cell_id: NotRequired[str]


class DeleteOp(TypedDict):
    op: Literal["delete"]
    cell_id: str
    expect: str


class MoveOp(TypedDict):
    op: Literal["move"]
    cell_id: str
    expect: str
    after_id: str | None


EditOp = ReplaceOp | InsertOp | DeleteOp | MoveOp


class Provenance(TypedDict):
    """Who changed a cell: stored in the cell's ``metadata.ipyagent``."""

    #: The conversation's session file, e.g. "analysis.agent.jsonl".
    session: str | None
    run: str
    call: str
    #: The edit is ``%agent fix``'s proposal for a failed cell: Keep on its review runs the cell.
    #: Not stored in the cell's metadata.
    fix: NotRequired[bool]


class EditParams(TypedDict):
    """``edit``: the ops, applied all or nothing, once per ``edit_id``."""

    edit_id: str
    provenance: Provenance
    ops: list[EditOp]


class UndoEditParams(TypedDict):
    """``undo_edit``: undo one edit, leaving alone the cells changed since."""

    edit_id: str


class UndoRunParams(TypedDict):
    """``undo_run``: undo every edit of a run (its provenance's ``run``), newest first, kept cells
    too, leaving alone the cells the user changed since."""

    #: The run; None: the latest run with changes left to undo in that page.
    run: str | None


def parse_page_message(data: object) -> PageMessage | None:
    """``data`` as a page message, or None when it is not one this kernel knows."""
    if not isinstance(data, dict):
        return None
    kind = data.get("kind")
    if kind == "hello":
        protocol, version = data.get("protocol"), data.get("version")
        if not isinstance(protocol, int) or isinstance(protocol, bool) or not isinstance(version, str):
            return None
        path = data.get("path")
        return Hello(
            kind="hello",
            protocol=protocol,
            version=version,
            client=str(data.get("client") or "a page"),
            path=path if isinstance(path, str) else None,
        )
    if kind == "response":
        rid, ok = data.get("id"), data.get("ok")
        if not isinstance(rid, str) or not isinstance(ok, bool):
            return None
        response = Response(kind="response", id=rid, ok=ok)
        if ok:
            result = data.get("result")
            if not isinstance(result, dict):
                return None
            response["result"] = result
        else:
            response["error"] = str(data.get("error") or "the page gave no reason")
        return response
    if kind == "focus":
        return Focus(kind="focus")
    if kind == "request":
        rid, method, params = data.get("id"), data.get("method"), data.get("params")
        if not isinstance(rid, str) or method != "undo_variables":
            return None
        return PageRequest(
            kind="request", id=rid, method=method, params=params if isinstance(params, dict) else {}
        )
    return None


def answer_hello(hello: Hello, *, version: str) -> Welcome | Mismatch:
    """The kernel's answer to a page's hello."""
    if hello["protocol"] == PROTOCOL:
        return Welcome(kind="welcome", protocol=PROTOCOL, version=version)
    message = mismatch_message(
        page_protocol=hello["protocol"],
        page_version=hello["version"],
        kernel_protocol=PROTOCOL,
        kernel_version=version,
    )
    return Mismatch(kind="mismatch", protocol=PROTOCOL, version=version, message=message)


def mismatch_message(
    *, page_protocol: int, page_version: str, kernel_protocol: int, kernel_version: str
) -> str:
    """What to do when page and kernel speak different protocols, the action first. The side
    with the lower number runs the older ipyagent: a page with an old extension is reloaded; a
    kernel that imported an old ipyagent is restarted. (``labext/src/protocol.js`` tells the
    page's user the same, with a button that does it.)"""
    page = f"{page_version}, protocol {page_protocol}"
    kernel = f"{kernel_version}, protocol {kernel_protocol}"
    if page_protocol < kernel_protocol:
        return (
            f"Reload the page. Its ipyagent extension ({page}) is older than this kernel's ipyagent "
            f"({kernel}); until then the agent works on the saved file."
        )
    return (
        f"Restart the kernel. It imported ipyagent {kernel}, older than the page's extension "
        f"({page}); until then the agent works on the saved file. If this comes back, upgrade "
        "ipyagent in the kernel's environment."
    )
