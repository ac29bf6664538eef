"""Comm traffic of the run view: messages and bytes a real kernel sends for a streamed answer.

For 1k / 5k / 20k-token answers streamed at 50 and 2,000 tokens/s (a scripted model in a real
ipykernel), count the widget's comm messages on iopub and their bytes, beside a naive
one-message-per-token baseline (the same view with its throttle off).

    python bench/comm_traffic.py [--sizes 1000,5000,20000] [--rates 50,2000] [--max-seconds 120]

Targets: <= 25 messages/s; bytes <= 3x the final text plus a constant per message.
Runs longer than --max-seconds are skipped (20k tokens at 50 tok/s takes 400 s), and say so.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _report import report

TOKEN = "word "  # one token of five characters


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


def execute(kc: Any, code: str, timeout: float = 900) -> list[dict[str, Any]]:
    msg_id = kc.execute(code)
    messages = []
    while True:
        msg = kc.get_iopub_msg(timeout=timeout)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            break
        messages.append(msg)
    reply = kc.get_shell_msg(timeout=timeout)
    assert reply["content"]["status"] == "ok", reply["content"]
    return messages


def measure(kc: Any, tokens: int, rate: float, interval: float) -> dict[str, Any]:
    execute(kc, f"%config AgentMagics.widget_interval = {interval}")
    execute(
        kc,
        f"m = ScriptedModel([[text({TOKEN!r} * {tokens})]], chunk_size={len(TOKEN)}, delay={1 / rate})",
    )
    started = time.monotonic()
    messages = execute(kc, "%%agent -m m --new\nstream")
    seconds = time.monotonic() - started
    comm = [m for m in messages if m["msg_type"] in ("comm_msg", "comm_open")]
    sent = sum(len(json.dumps(m["content"])) for m in comm)
    # comm_open carries the view's bundled JavaScript and CSS: a constant per view, not per token.
    opening = sum(len(json.dumps(m["content"])) for m in comm if m["msg_type"] == "comm_open")
    final = len(TOKEN * tokens)
    return {
        "messages": len(comm),
        "bytes": sent,
        "open_bytes": opening,
        "seconds": seconds,
        "final_text_bytes": final,
    }


def main(sizes: list[int], rates: list[float], max_seconds: float) -> None:
    rows: list[list[Any]] = []
    skipped: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        km, kc = start_kernel(Path(tmp))
        try:
            execute(kc, "%load_ext ipyagent\nfrom ipyagent.testing import ScriptedModel, text")
            for tokens in sizes:
                for rate in rates:
                    if tokens / rate > max_seconds:
                        skipped.append(f"{tokens} tokens at {rate:g} tok/s ({tokens / rate:.0f} s)")
                        continue
                    for label, interval in (("batched", 0.05), ("naive", 0.0)):
                        r = measure(kc, tokens, rate, interval)
                        updates = r["bytes"] - r["open_bytes"]
                        over = (updates - 3 * r["final_text_bytes"]) / max(r["messages"], 1)
                        rows.append(
                            [
                                tokens, rate, label, r["messages"], r["messages"] / r["seconds"],
                                r["open_bytes"], updates, updates / r["final_text_bytes"], over,
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
            "view open B",
            "update B",
            "update B/text B",
            "B/msg beyond 3x text",
        ],
        rows,
        {
            "skipped": skipped,
            "target_messages_per_s": 25,
            "target_bytes": "<= 3x final text + constant per message",
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
