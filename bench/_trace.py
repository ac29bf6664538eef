"""What a page's long tasks were, from a Chrome trace (bench/browser.py --trace).

A long task's wall time is not all the page's work: on a loaded machine the renderer's thread
waits for a CPU in the middle of a task, and the longtask observer cannot tell. The trace can:
each task has its wall time (``dur``) and the time its thread ran (``tdur``), and the events in it
say what it did (a frame's script, style, layout, paint; a garbage collection).
"""

from __future__ import annotations

import base64
import json
from collections import Counter
from typing import Any

CATEGORIES = [
    "toplevel",
    "devtools.timeline",
    "disabled-by-default-devtools.timeline",
    "v8",
    "disabled-by-default-v8.gc",
]
TASK = "ThreadControllerImpl::RunTask"


def start(cdp: Any) -> None:
    cdp.send(
        "Tracing.start",
        {
            "traceConfig": {"includedCategories": CATEGORIES, "recordMode": "recordContinuously"},
            "transferMode": "ReturnAsStream",
        },
    )


def stop(page: Any, cdp: Any) -> list[dict[str, Any]]:
    """End the trace and return its events."""
    done: dict[str, Any] = {}
    cdp.on("Tracing.tracingComplete", lambda event: done.update(event))
    cdp.send("Tracing.end")
    while "stream" not in done:
        page.wait_for_timeout(100)
    chunks = []
    while True:
        got = cdp.send("IO.read", {"handle": done["stream"], "size": 1 << 22})
        chunks.append(base64.b64decode(got["data"]) if got.get("base64Encoded") else got["data"].encode())
        if got.get("eof"):
            break
    cdp.send("IO.close", {"handle": done["stream"]})
    data = json.loads(b"".join(chunks))
    events: list[dict[str, Any]] = data["traceEvents"] if isinstance(data, dict) else data
    return events


def long_tasks(events: list[dict[str, Any]], min_ms: float = 50) -> list[dict[str, Any]]:
    """The renderer main thread's tasks over ``min_ms`` of wall time: wall and thread ms, and the
    events that took most of the thread's time in each (exclusive of the events inside them)."""
    names = {
        (e["pid"], e["tid"]): e["args"]["name"]
        for e in events
        if e.get("ph") == "M" and e.get("name") == "thread_name"
    }
    counts = Counter((e.get("pid"), e.get("tid")) for e in events)
    mains = [key for key, name in names.items() if name == "CrRendererMain"]
    if not mains:
        return []
    main = max(mains, key=lambda key: counts[key])
    spans = sorted(
        (e["ts"], e["ts"] + e.get("dur", 0), e.get("tdur", 0), e["name"])
        for e in events
        if (e.get("pid"), e.get("tid")) == main and e.get("ph") == "X"
    )
    out = []
    for i, (start, end, cpu, name) in enumerate(spans):
        if name != TASK or end - start < min_ms * 1000:
            continue
        own: Counter[str] = Counter()
        stack: list[tuple[int, str]] = []  # (end, name) of the open events inside the task
        for s_start, s_end, s_cpu, s_name in spans[i + 1 :]:
            if s_start >= end:
                break
            while stack and s_start >= stack[-1][0]:
                stack.pop()
            own[s_name] += s_cpu
            if stack:
                own[stack[-1][1]] -= s_cpu
            stack.append((s_end, s_name))
        top = [f"{n} {us / 1000:.1f}" for n, us in own.most_common(3) if us > 0]
        out.append({"wall_ms": round((end - start) / 1000, 1), "thread_ms": round(cpu / 1000, 1), "top": top})
    return out
