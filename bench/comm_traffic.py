"""Iopub traffic of a ``%%agent`` cell: every message and byte a real kernel sends for a streamed
answer, and whether the final state survives.

For 1k / 5k / 20k-token answers streamed at 50 and 2,000 tokens/s (a scripted model in a real
ipykernel), the cell runs three ways:

- ``page``: this script plays the notebook page's part, as JupyterLab does on the same kernel:
  when the view is displayed it says hello and syncs (on a comm subshell where the kernel has
  them, so the messages go through while the cell blocks), and the first view of the session
  asks for the front-end runtime, which a page loads once (counted apart, not per cell);
- ``naive``: the same with the throttle off (one message per token), the baseline;
- ``no page``: nobody answers (what a headless runner sees): the run's text is also written as
  ordinary outputs at the end, for nbval.

Counted: every iopub message of the cell, and the replies to the page's own messages (acks, a
whole state sent again, their busy/idle). Bytes are the JSON of each message's content plus its
binary buffers (``content B``) and the whole message with header and parent header (``wire B``).
After each ``page`` run the page asks for the view's state as a reloaded page does, and the
final text must be all there.

    python bench/comm_traffic.py [--sizes 1000,5000,20000] [--rates 50,2000] [--max-seconds 120]

Targets (issue 15), on a 5,000-token run: all iopub bytes of the cell <= 3x the text, <= 25
messages/s, the final state never lost. Runs longer than --max-seconds are skipped (20k tokens at
50 tok/s takes 400 s), and say so. To measure another checkout, put it first on PYTHONPATH.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _report import report

TOKEN = "word "  # one token of five characters
VIEW = "ipyagent.widgets.views.RunView"


def start_kernel(work: Path) -> Any:
    from jupyter_client.manager import KernelManager

    spec = work / "jupyter" / "kernels" / "bench"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": "bench", "language": "python"})
    )
    os.environ["JUPYTER_PATH"] = str(work / "jupyter")
    km = KernelManager(kernel_name="bench")
    km.start_kernel(cwd=str(work))
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=60)
    return km, kc


class Page:
    """The notebook page's side of the views' comms, as JupyterLab plays it."""

    def __init__(self, kc: Any) -> None:
        self.kc = kc
        self.subshell: str | None = None
        features = kc.kernel_info(reply=True, timeout=30)["content"].get("supported_features", [])
        if "kernel subshells" in features:  # ipykernel 7: comm messages skip the busy main shell
            request = kc.session.msg("create_subshell_request", {})
            kc.control_channel.send(request)
            self.subshell = kc.get_control_msg(timeout=30)["content"]["subshell_id"]
        self.has_runtime = False
        self.sent: set[str] = set()  # ids of this page's messages: their replies count too
        self.opened: dict[str, dict[str, Any]] = {}  # comm id -> the view's comm_open

    def send(self, comm_id: str, data: dict[str, Any]) -> None:
        msg = self.kc.session.msg("comm_msg", {"comm_id": comm_id, "data": data})
        if self.subshell is not None:
            msg["header"]["subshell_id"] = self.subshell
        self.sent.add(msg["header"]["msg_id"])
        self.kc.shell_channel.send(msg)

    def iopub(self, msg: dict[str, Any]) -> None:
        """Follow the cell's messages: a run view displayed is rendered (see :meth:`render`)."""
        content = msg["content"]
        if msg["msg_type"] == "comm_open" and is_view(content):
            self.opened[content["comm_id"]] = content
        shown = (content.get("data") or {}).get("application/vnd.jupyter.widget-view+json")
        if msg["msg_type"] == "display_data" and shown and shown["model_id"] in self.opened:
            self.render(shown["model_id"], self.opened[shown["model_id"]]["data"]["state"])

    def render(self, comm_id: str, state: dict[str, Any]) -> None:
        """Show a view: load the runtime (once), fold in its state (sync), say hello."""
        if not self.has_runtime:
            ask = {"action": "runtime", "page": "bench", "round": 1}
            self.send(comm_id, {"method": "custom", "content": ask})
            self.has_runtime = True
        seq = (state.get("state") or {}).get("seq", 0)
        self.send(comm_id, {"method": "custom", "content": {"action": "sync", "seq": seq}})
        self.send(comm_id, {"method": "custom", "content": {"action": "hello"}})

    def reloaded_state(self, comm_id: str, timeout: float = 30) -> dict[str, Any]:
        """The view's state as a reloaded page gets it from the kernel."""
        self.send(comm_id, {"method": "request_state"})
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = self.kc.get_iopub_msg(timeout=timeout)
            data = msg["content"].get("data") or {}
            mine = msg["msg_type"] == "comm_msg" and msg["content"].get("comm_id") == comm_id
            if mine and data.get("method") == "update" and "state" in data.get("state", {}):
                state: dict[str, Any] = data["state"]["state"]
                return state
        raise TimeoutError("the kernel did not send the view's state")


def is_view(comm_open: dict[str, Any]) -> bool:
    return bool(((comm_open.get("data") or {}).get("state") or {}).get("_anywidget_id") == VIEW)


def size(msg: dict[str, Any], *, wire: bool) -> int:
    buffers = sum(len(b) for b in msg.get("buffers") or [])
    if not wire:
        return len(json.dumps(msg["content"])) + buffers
    parts = {k: msg[k] for k in ("header", "parent_header", "metadata", "content")}
    return len(json.dumps(parts, default=str)) + buffers


def execute(kc: Any, code: str, page: Page | None = None, timeout: float = 900) -> dict[str, Any]:
    """Run ``code``; the iopub messages of the cell and of the page's replies, the runtime apart."""
    msg_id = kc.execute(code)
    cell: list[dict[str, Any]] = []
    runtime: list[dict[str, Any]] = []
    views: list[str] = []
    done = False
    drain_until = float("inf")
    while time.monotonic() < drain_until:
        try:
            msg = kc.get_iopub_msg(timeout=timeout if not done else max(drain_until - time.monotonic(), 0.01))
        except queue.Empty:
            break
        parent = msg["parent_header"].get("msg_id")
        if parent != msg_id and (page is None or parent not in page.sent):
            continue
        content = msg["content"]
        if msg["msg_type"] == "comm_msg" and (content["data"].get("content") or {}).get("kind") == "runtime":
            runtime.append(msg)
            continue
        cell.append(msg)
        if msg["msg_type"] == "comm_open" and is_view(content):
            views.append(content["comm_id"])
        if page is not None:
            page.iopub(msg)
        if parent == msg_id and msg["msg_type"] == "status" and content["execution_state"] == "idle":
            done = True
            drain_until = time.monotonic() + 0.5  # replies to the page's last messages
    while True:
        reply = kc.get_shell_msg(timeout=timeout)
        if reply["parent_header"].get("msg_id") == msg_id:
            break
    assert reply["content"]["status"] == "ok", reply["content"]
    return {"cell": cell, "runtime": runtime, "views": views}


def measure(kc: Any, page: Page | None, tokens: int, rate: float, interval: float) -> dict[str, Any]:
    execute(kc, f"import ipyagent.widgets.transport as _transport; _transport.DEFAULT_INTERVAL = {interval}")
    execute(
        kc,
        f"m = ScriptedModel([[text({TOKEN!r} * {tokens})]], chunk_size={len(TOKEN)}, delay={1 / rate})",
    )
    started = time.monotonic()
    got = execute(kc, "%%agent -m m --new\nstream", page)
    seconds = time.monotonic() - started
    cell = got["cell"]
    text = len(TOKEN * tokens)
    comm = [m for m in cell if m["msg_type"] == "comm_msg"]
    updates = [m for m in comm if m["content"]["data"].get("method") == "update"]
    final_kept: bool | None = None
    if page is not None and got["views"]:
        state = page.reloaded_state(got["views"][0])
        shown = "".join(b.get("text", "") for b in state["blocks"] if b["kind"] == "text")
        final_kept = shown == TOKEN * tokens and state["status"] == "completed"
    return {
        "messages": len(cell),
        "seconds": seconds,
        "content": sum(size(m, wire=False) for m in cell),
        "wire": sum(size(m, wire=True) for m in cell),
        "opens": sum(size(m, wire=False) for m in cell if m["msg_type"] == "comm_open"),
        "state_updates": sum(size(m, wire=False) for m in updates),
        "displays": sum(size(m, wire=False) for m in cell if m["msg_type"] == "display_data"),
        "runtime": sum(size(m, wire=False) for m in got["runtime"]),
        "text": text,
        "final_kept": final_kept,
    }


MODES = (("page", 0.05, True), ("naive", 0.0, True), ("no page", 0.05, False))


def main(sizes: list[int], rates: list[float], max_seconds: float) -> None:
    rows: list[list[Any]] = []
    skipped: list[str] = []
    runtime_bytes = 0
    with tempfile.TemporaryDirectory() as tmp:
        km, kc = start_kernel(Path(tmp))
        try:
            execute(kc, "%load_ext ipyagent\nfrom ipyagent.testing import ScriptedModel, text")
            page = Page(kc)
            # Not measured: the first run imports the views; its page loads the runtime.
            runtime_bytes = measure(kc, page, 50, 1000, 0.05)["runtime"]
            for tokens in sizes:
                for rate in rates:
                    if tokens / rate > max_seconds:
                        skipped.append(f"{tokens} tokens at {rate:g} tok/s ({tokens / rate:.0f} s)")
                        continue
                    for label, interval, with_page in MODES:
                        r = measure(kc, page if with_page else None, tokens, rate, interval)
                        runtime_bytes += r["runtime"]  # none: the page has it
                        rows.append(
                            [
                                tokens, rate, label, r["messages"], r["messages"] / r["seconds"],
                                r["opens"], r["state_updates"], r["displays"], r["content"],
                                r["content"] / r["text"], r["wire"] / r["text"],
                                "-" if r["final_kept"] is None else ("yes" if r["final_kept"] else "NO"),
                            ]
                        )  # fmt: skip
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)
    report(
        "comm_traffic",
        [
            "tokens",
            "tok/s",
            "mode",
            "messages",
            "msgs/s",
            "opens B",
            "state B",
            "displays B",
            "content B",
            "content/text",
            "wire/text",
            "final kept",
        ],
        rows,
        {
            "skipped": skipped,
            "runtime_bytes_once_per_page": runtime_bytes,
            "target": "5,000 tokens: content/text <= 3, <= 25 msgs/s, final state kept",
        },
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1000,5000,20000")
    parser.add_argument("--rates", default="50,2000")
    parser.add_argument("--max-seconds", type=float, default=120)
    args = parser.parse_args()
    main(
        [int(s) for s in args.sizes.split(",")],
        [float(r) for r in args.rates.split(",")],
        args.max_seconds,
    )
