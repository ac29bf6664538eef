"""The live-notebook channel: this kernel's comms with the pages that show its notebook.

ipyagent's JupyterLab 4 / Notebook 7 extension (``labext/``, shipped prebuilt in the wheel)
opens one comm per open notebook to :data:`~.live_protocol.TARGET`, which ``%load_ext``
registers here. This module owns those connections: the handshake (a page speaking another
protocol is told what to do, and never asked anything), which page is asked (the one the user
turned to last), requests answered while a cell blocks, and the pages' own requests, passed to
the handlers the kernel state gives (``undo_variables``). It does not own what a request means
(:mod:`.live_document` types the answers) nor the tools that use it.

How the page finds the kernel, in either order of starting: at ``%load_ext`` the kernel opens an
*announce* comm to the page's target and keeps it open; a page already connected opens its comm
when the announce arrives, and a page that connects later finds the open announce comm with a
comm_info request. A kernel that never loads ipyagent is sent nothing but that comm_info.

How an answer reaches a kernel whose main thread is busy (a ``%%agent`` cell, or a cell calling
:func:`live_document`): JupyterLab >= 4.4 sends the comm's messages over a kernel subshell, which
ipykernel 7 handles on its own thread; ipykernel 7 routes a comm's messages to the subshell that
last *sent* on it, so the comm keeps the page's choice instead (as the widget views do). ipykernel
6 has no subshells: a wait on the main thread pumps the kernel's messages with jupyter_ui_poll,
as ``%%agent`` does for the widget buttons.

Where no page is connected (VS Code, Colab, nbclient, nbval, terminal IPython, a page without the
extension) :meth:`LiveNotebook.read` says why, and the caller works on the saved file.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from .live_protocol import (
    ANNOUNCE_TARGET,
    PROTOCOL,
    TARGET,
    Announce,
    CellOutputsParams,
    EditOp,
    EditParams,
    Hello,
    Method,
    Notice,
    PageRequest,
    Provenance,
    ReadNotebookParams,
    Request,
    Response,
    UndoEditParams,
    UndoRunParams,
    answer_hello,
    parse_page_message,
)

if TYPE_CHECKING:  # pydantic loads at the first read, not at %load_ext
    from pydantic import BaseModel

    from .live_document import EditAnswer, LiveDocument, UndoAnswer, UndoRunAnswer

__all__ = [
    "Connected",
    "LiveNotebook",
    "Mismatched",
    "NoPage",
    "PageState",
    "live_document",
    "new_edit_id",
]

log = logging.getLogger("ipyagent")

#: Seconds a read waits for the page's answer.
READ_TIMEOUT = 5.0
#: Seconds an edit waits for the page's answer (after which it may or may not have been applied).
EDIT_TIMEOUT = 5.0
#: Seconds after ``%load_ext`` during which a read waits for a page that is still connecting
#: (Run All reaches the next cell before the page has answered the announce).
CONNECT_GRACE = 2.0
#: Characters kept of each output in a read (the page trims them).
MAX_OUTPUT_CHARS = 2000


@dataclass(frozen=True)
class Connected:
    kind: Literal["connected"]
    client: str
    path: str | None
    version: str


@dataclass(frozen=True)
class Mismatched:
    kind: Literal["mismatch"]
    #: What to do, for the user: reload the page or restart the kernel.
    message: str


@dataclass(frozen=True)
class NoPage:
    kind: Literal["no_page"]
    reason: str


#: Whether the live document can be read, and if not, why.
PageState = Connected | Mismatched | NoPage


@dataclass(eq=False)
class _Page:
    """One page's comm to this kernel."""

    comm: Any
    hello: Hello
    mismatch: str | None
    #: When the page was last heard from or turned to (a counter: larger is later).
    seen: int
    #: False after a request timed out, until the page is heard from again.
    responsive: bool = True
    pending: dict[str, concurrent.futures.Future[dict[str, Any]]] = field(default_factory=dict)


class LiveNotebook:
    """The channel of one kernel (owned by its :class:`~.state.KernelState`)."""

    def __init__(
        self,
        shell: Any,
        *,
        version: str | None = None,
        on_request: Mapping[str, Callable[[dict[str, Any]], dict[str, Any]]] | None = None,
    ) -> None:
        from ..__about__ import __version__

        self.shell = shell
        #: What answers the pages' requests, by method (the kernel state's, e.g. ``undo_variables``).
        self.on_request = dict(on_request or {})
        self.version: str = __version__ if version is None else version
        self._lock = threading.Lock()
        self._pages: list[_Page] = []
        self._clock = itertools.count(1)
        self._announce: Any = None
        self._opened_at: float | None = None
        self._manager: Any = None

    # -- lifecycle -------------------------------------------------------------------------
    def open(self) -> None:
        """Register the comm target and announce this kernel to the pages (``%load_ext``).
        Does nothing outside a Jupyter kernel (terminal IPython)."""
        if getattr(self.shell, "kernel", None) is None or self._manager is not None:
            return
        import comm

        self._manager = comm.get_comm_manager()
        self._manager.register_target(TARGET, self._on_open)
        self._opened_at = time.monotonic()
        announce = Announce(kind="announce", protocol=PROTOCOL, version=self.version)
        self._announce = comm.create_comm(target_name=ANNOUNCE_TARGET, data=dict(announce))

    def close(self) -> None:
        """Unregister, close the announce comm and every page's comm (``%unload_ext``): pages
        then wait for the next announce."""
        if self._manager is None:
            return
        self._manager.unregister_target(TARGET, self._on_open)
        self._manager = None
        with self._lock:
            pages, self._pages = self._pages, []
        for page in pages:
            self._fail_pending(page, "the kernel closed the channel")
            _close_quietly(page.comm)
        _close_quietly(self._announce)
        self._announce = None

    # -- state -----------------------------------------------------------------------------
    def state(self) -> PageState:
        """Whether a page can be asked now, and if not, why (said in tool results)."""
        with self._lock:
            page = self._choose()
            mismatched = [p for p in self._pages if p.mismatch is not None]
        if page is not None:
            hello = page.hello
            return Connected(
                kind="connected", client=hello["client"], path=hello["path"], version=hello["version"]
            )
        if mismatched:
            message = max(mismatched, key=lambda p: p.seen).mismatch or ""
            return Mismatched(kind="mismatch", message=message)
        return NoPage(kind="no_page", reason=self._why_no_page())

    def _why_no_page(self) -> str:
        from .front_end import no_front_end

        if self._manager is None:
            return "no Jupyter kernel (terminal IPython): there is no page to ask"
        headless = no_front_end(self.shell)
        if headless is not None:
            return f"no page shows this notebook ({headless})"
        return (
            "no JupyterLab or Notebook 7 page with ipyagent's extension is connected to this kernel "
            "(VS Code, Colab and other front ends read the saved file; in JupyterLab, reload the "
            "page after installing ipyagent)"
        )

    def _choose(self) -> _Page | None:
        """The compatible page seen last, preferring pages that answered their last request."""
        compatible = [p for p in self._pages if p.mismatch is None]
        responsive = [p for p in compatible if p.responsive] or compatible
        return max(responsive, key=lambda p: p.seen, default=None)

    # -- notices ---------------------------------------------------------------------------
    def notify_cell_outputs(self, params: CellOutputsParams) -> bool:
        """Tell the page seen last about a cell the agent runs, without waiting (the caller is
        the main thread running that cell); False when no page can be told."""
        with self._lock:
            page = self._choose()
        if page is None:
            return False
        try:
            page.comm.send(dict(Notice(kind="notice", method="cell_outputs", params=dict(params))))
        except Exception:  # the comm closed under us: the cell still runs, the agent still reads it
            log.debug("ipyagent: could not send a cell's outputs to the page", exc_info=True)
            return False
        return True

    # -- requests --------------------------------------------------------------------------
    def request(
        self, method: Method, params: dict[str, Any], *, timeout: float = READ_TIMEOUT
    ) -> dict[str, Any]:
        """Ask the page seen last; its result. Raises a
        :class:`~.live_document.LiveNotebookError` when no page can answer."""
        from .live_document import LiveNotebookError, LiveNotebookMismatch, PageError, PageTimeout

        self.settle()
        state = self.state()
        if isinstance(state, Mismatched):
            raise LiveNotebookMismatch(state.message, hint="Until then the agent reads the saved file.")
        if isinstance(state, NoPage):
            raise LiveNotebookError(f"The live document cannot be read: {state.reason}.")
        future: concurrent.futures.Future[dict[str, Any]] = concurrent.futures.Future()
        rid = uuid.uuid4().hex
        with self._lock:
            page = self._choose()
            if page is None:  # the page left since state() looked
                raise LiveNotebookError("The live document cannot be read: the page went away.")
            page.pending[rid] = future
        page.comm.send(dict(Request(kind="request", id=rid, method=method, params=params)))
        try:
            response = self._wait(future, timeout)
        except concurrent.futures.TimeoutError:
            with self._lock:
                page.pending.pop(rid, None)
                page.responsive = False
            raise PageTimeout(
                f"The page ({page.hello['client']}) did not answer within {timeout:g} s.",
                hint="If a cell is running, its answer may be held until the cell ends: JupyterLab "
                "4.4 or later with ipykernel 7 (or ipykernel 6) lets it through.",
            ) from None
        if not response["ok"]:
            raise PageError(f"The page could not answer {method!r}: {response.get('error')}.")
        return response.get("result", {})

    def read(
        self,
        *,
        timeout: float = READ_TIMEOUT,
        max_output_chars: int = MAX_OUTPUT_CHARS,
        start: int | None = None,
        limit: int | None = None,
        page_chars: int | None = None,
    ) -> LiveDocument:
        """The open notebook as the page shows it now (unsaved edits included): every cell, or
        those from ``start``, at most ``limit`` of them and about ``page_chars`` characters
        (always one)."""
        from .live_document import LiveDocument

        params = ReadNotebookParams(max_output_chars=max_output_chars)
        if start is not None:
            params["start"] = start
        if limit is not None:
            params["limit"] = limit
        if page_chars is not None:
            params["page_chars"] = page_chars
        result = self.request("read_notebook", dict(params), timeout=timeout)
        state = self.state()
        client = state.client if isinstance(state, Connected) else ""
        return _validated(LiveDocument, "read_notebook", {**result, "client": client})

    def edit(
        self,
        ops: list[EditOp],
        *,
        provenance: Provenance,
        edit_id: str | None = None,
        timeout: float | None = None,
    ) -> EditAnswer:
        """Change the open document: ``ops`` applied all or nothing (one op's ``expect`` that is
        not the cell's source now and nothing changes: the answer lists the conflicts), in one
        undo step, once per ``edit_id`` (a new one when not given). Raises
        :class:`~.live_document.PageTimeout` when the page does not answer: whether the edit was
        applied is then not known (asking again with the same ``edit_id`` does not apply it twice)."""
        from .live_document import EditAnswer

        params = EditParams(edit_id=edit_id or new_edit_id(), provenance=provenance, ops=ops)
        result = self.request("edit", dict(params), timeout=EDIT_TIMEOUT if timeout is None else timeout)
        return _validated(EditAnswer, "edit", result)

    def undo_edit(self, edit_id: str, *, timeout: float | None = None) -> UndoAnswer:
        """Undo the edit ``edit_id`` in the open document, cell by cell: a cell the user changed
        since the edit is left alone (the answer's ``kept``), so no later work is lost."""
        from .live_document import UndoAnswer

        params = UndoEditParams(edit_id=edit_id)
        result = self.request("undo_edit", dict(params), timeout=EDIT_TIMEOUT if timeout is None else timeout)
        return _validated(UndoAnswer, "undo_edit", result)

    def undo_run(self, run_id: str | None = None, *, timeout: float | None = None) -> UndoRunAnswer:
        """Undo every edit of the run ``run_id`` (None: the latest run with changes left) in the
        open document, newest first: sources, order, deleted cells (with their outputs) and
        inserted cells, kept ones too (a run is a checkpoint). A cell the user changed since is
        left alone (the answer's ``kept``). The kernel's variables are the kernel's own to put
        back (:class:`~.variable_checkpoint.VariableCheckpoints`)."""
        from .live_document import UndoRunAnswer

        params = UndoRunParams(run=run_id)
        result = self.request("undo_run", dict(params), timeout=EDIT_TIMEOUT if timeout is None else timeout)
        return _validated(UndoRunAnswer, "undo_run", result)

    def settle(self) -> None:
        """Just after ``%load_ext``, give a page that is still connecting a moment."""
        if self._opened_at is None:
            return
        deadline = self._opened_at + CONNECT_GRACE
        if time.monotonic() >= deadline or self._pages:
            return
        from .front_end import no_front_end

        if no_front_end(self.shell) is not None:
            return
        with self._pumping() as pump:
            while time.monotonic() < deadline and not self._pages:
                if pump is not None:
                    pump()
                time.sleep(0.02)

    def _wait(self, future: concurrent.futures.Future[dict[str, Any]], timeout: float) -> Response:
        deadline = time.monotonic() + timeout
        with self._pumping() as pump:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise concurrent.futures.TimeoutError
                if pump is None:
                    return _as_response(future.result(timeout=left))
                pump()
                try:
                    return _as_response(future.result(timeout=min(left, 0.01)))
                except concurrent.futures.TimeoutError:
                    continue

    def _pumping(self) -> Any:
        """On the main thread of an ipykernel 6 kernel, a pump for the messages the wait needs."""
        import contextlib

        if threading.current_thread() is not threading.main_thread():
            return contextlib.nullcontext(None)
        from .widget_renderer import pump_comm_messages

        return pump_comm_messages(self.shell)

    # -- comm handlers (on a subshell's thread, the main thread or the kernel's loop) -----------
    def _on_open(self, comm: Any, msg: dict[str, Any]) -> None:
        if hasattr(comm, "_reply_subshell_for"):
            # ipykernel 7: answer on the page's subshell, not on the (busy) main shell.
            comm._reply_subshell_for = lambda _data, default: default
        hello = parse_page_message((msg.get("content") or {}).get("data"))
        if hello is None or hello["kind"] != "hello":
            log.warning("ipyagent: a page opened %s without a valid hello; closing it.", TARGET)
            comm.close()
            return
        answer = answer_hello(hello, version=self.version)
        mismatch = answer["message"] if answer["kind"] == "mismatch" else None
        page = _Page(comm=comm, hello=hello, mismatch=mismatch, seen=next(self._clock))
        with self._lock:
            self._pages.append(page)
        comm.on_msg(lambda m: self._on_msg(page, m))
        comm.on_close(lambda _m: self._on_close(page))
        comm.send(dict(answer))
        if mismatch is not None:
            log.warning("ipyagent: %s", mismatch)

    def _on_msg(self, page: _Page, msg: dict[str, Any]) -> None:
        message = parse_page_message((msg.get("content") or {}).get("data"))
        if message is None or message["kind"] == "hello":
            log.debug("ipyagent: ignored a message the live-notebook protocol does not expect: %r", msg)
            return
        future = None
        with self._lock:
            page.seen = next(self._clock)
            page.responsive = True
        if message["kind"] == "request":
            self._answer(page, message)
            return
        with self._lock:
            if message["kind"] == "response":
                future = page.pending.pop(message["id"], None)
        if future is not None and not future.done():
            future.set_result(dict(message))

    def _answer(self, page: _Page, request: PageRequest) -> None:
        """Answer a page's request (on the thread its message came on: a subshell's while a cell
        runs, else the main thread)."""
        handler = self.on_request.get(request["method"])
        response = Response(kind="response", id=request["id"], ok=False)
        try:
            if handler is None:
                raise LookupError(f"this kernel does not answer {request['method']!r}")
            response = Response(kind="response", id=request["id"], ok=True, result=handler(request["params"]))
        except Exception as exc:
            log.debug("ipyagent: a page's request failed", exc_info=True)
            response["error"] = f"{type(exc).__name__}: {exc}"
        try:
            page.comm.send(dict(response))
        except Exception:  # the page went away: nobody to tell
            log.debug("ipyagent: could not answer a page's request", exc_info=True)

    def _on_close(self, page: _Page) -> None:
        with self._lock:
            if page in self._pages:
                self._pages.remove(page)
        self._fail_pending(page, "the page closed the notebook")

    def _fail_pending(self, page: _Page, why: str) -> None:
        with self._lock:
            pending, page.pending = page.pending, {}
        for future in pending.values():
            if not future.done():
                future.set_result({"kind": "response", "id": "", "ok": False, "error": why})


def new_edit_id() -> str:
    """A fresh ``edit_id``: the page applies each one once."""
    return f"e-{uuid.uuid4().hex}"


_Answer = TypeVar("_Answer", bound="BaseModel")


def _validated(model: type[_Answer], method: str, result: dict[str, Any]) -> _Answer:
    """The page's ``result`` as ``model``; a malformed one is a :class:`~.live_document.PageError`."""
    from pydantic import ValidationError

    from .live_document import PageError

    try:
        return model.model_validate(result)
    except ValidationError as exc:
        raise PageError(
            f"The page's answer to {method!r} is not one this kernel understands: {exc}",
            hint="Reload the page, and restart the kernel if that does not help.",
        ) from exc


def _as_response(data: dict[str, Any]) -> Response:
    parsed = parse_page_message(data)
    assert parsed is not None and parsed["kind"] == "response"
    return parsed


def _close_quietly(comm: Any) -> None:
    if comm is None:
        return
    try:
        comm.close()
    except Exception:  # the kernel is shutting down: nothing to tell
        log.debug("ipyagent: closing a comm failed", exc_info=True)


def live_document(*, timeout: float = READ_TIMEOUT) -> LiveDocument | None:
    """The notebook open in JupyterLab / Notebook 7 as the user sees it now — unsaved edits,
    the active and selected cells, trimmed outputs — or None where no page with ipyagent's
    extension is connected (VS Code, Colab, nbclient, terminal IPython; ``%load_ext ipyagent``
    not run).

    Raises :class:`~ipyagent.kernel.live_document.LiveNotebookMismatch`, saying whether to
    reload the page or restart the kernel, when the page's extension and this kernel's ipyagent
    do not speak the same protocol, and another
    :class:`~ipyagent.kernel.live_document.LiveNotebookError` when the page does not answer."""
    from IPython import get_ipython

    from .extension import kernel_state

    state = kernel_state(get_ipython())
    if state is None:
        return None
    live = state.live
    live.settle()
    if isinstance(live.state(), NoPage):
        return None
    return live.read(timeout=timeout)
