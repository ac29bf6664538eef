"""The views' front-end code: sent to a page once, not with every view.

anywidget sends a widget's ``_esm`` with every view it opens. Ours is a small loader
(``static/run_view.js``, ``static/chat.js``, built from ``js/src/loader.js``) that finds the
runtime — ``static/runtime.js``: the views, marked, DOMPurify, highlight.js and the stylesheet,
~160 KB — already loaded on the page, or asks the kernel for it on its comm:
``{"action": "runtime", "hash": ..., "page": ..., "round": ...}``. :data:`REQUESTS` answers on
the same comm with ``{"kind": "runtime", "hash": ...}`` and the code as a binary buffer (no JSON
escaping), once per round of a page. A page repeats its request until it is answered because
JupyterLab sends a comm's first messages on the kernel's main shell, which the cell showing the
view may keep busy: that first request can arrive long after a repeat was answered.

The loaders know the runtime by the hash js/build.mjs computed, which :func:`runtime` computes
the same way. The protocol is in docs/widget-protocol.md. This module owns the runtime's bytes,
their name and the answers; the views (views.py) call it when asked.
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path
from typing import Any

from .view_state import RuntimeAction, RuntimeMessage

__all__ = ["REQUESTS", "RUNTIME", "STATIC", "RuntimeRequests", "runtime"]

STATIC = Path(__file__).parent / "static"
RUNTIME = STATIC / "runtime.js"


def runtime() -> tuple[str, bytes]:
    """The runtime's hash (the first 16 hex digits of its sha256) and its code.

    Read at each request (a page asks once), so a rebuilt bundle is served without a restart."""
    code = RUNTIME.read_bytes()
    return hashlib.sha256(code).hexdigest()[:16], code


class RuntimeRequests:
    """The kernel's answers to pages that ask for the runtime: one per round of requests.

    A page repeats a request through the newest view until it is answered; it starts a new
    round only when a round went unanswered (its answer lost with a view that closed, say) and
    another view comes. Requests may arrive on two threads at once (a comm subshell's, and the
    main shell's when it catches up with one that waited behind the cell)."""

    def __init__(self) -> None:
        self._answered: set[tuple[str, int]] = set()
        self._lock = threading.Lock()

    def answer(self, widget: Any, request: RuntimeAction) -> bool:
        """Send the runtime on ``widget``'s comm unless this round of this page had it already;
        says whether it was sent."""
        with self._lock:
            if (request["page"], request["round"]) in self._answered:
                return False
            self._answered.add((request["page"], request["round"]))
        digest, code = runtime()
        message: RuntimeMessage = {"kind": "runtime", "hash": digest}
        widget.send(message, buffers=[code])
        return True


#: This kernel's answers (every view answers through it).
REQUESTS = RuntimeRequests()
