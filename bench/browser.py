"""What the browser spends on a streaming answer, in a real Chromium.

No kernel: a page loads the bundled run view (ipyagent/widgets/static/runtime.js) with a stand-in
model and feeds it the same `patches` messages the kernel sends (docs/widget-protocol.md): an
`add` of a streaming text block, one `append` every 50 ms (the kernel's batching interval) at a
steady rate, then `set streaming=false` and the final status. That isolates the renderer's cost
from the kernel's and the server's.

For each shape (code block, table, list, one long paragraph, a mix) and size, it reports the
main-thread time per KB streamed (Chromium's TaskDuration from CDP ``Performance.getMetrics``:
script, style, layout and paint; and script, style and layout on their own), the longest task
(PerformanceObserver ``longtask``, which only sees tasks over 50 ms; and the longest
animation-frame callback, where the view renders), the final render and the view's DOM node count.
Prints a table, writes ``bench/results/browser.json``.

    python bench/browser.py [--sizes 10,100,1000] [--rate 20] [--shapes code,table,...]
                            [--static DIR]   # bundles to load (to measure another build)

A case that falls behind by more than --max-lag seconds stops early and says how far it got.
Needs Debian's chromium at /usr/bin/chromium and Playwright (never ``playwright install``).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.server
import random
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from _chromium import CHROMIUM, FLAGS
from _report import report

ROOT = Path(__file__).resolve().parent.parent
STATIC = ROOT / "ipyagent" / "widgets" / "static"
INTERVAL_MS = 50  # the kernel sends at most one patches message per ~50 ms

# -- a page with the bundled views and a stand-in model (shared with bench/browser_chat.py) --------

PAGE = """<!doctype html><meta charset="utf-8">
<body><div id="view" style="width: 900px"></div>
<script>
window.longtasks = [];
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) window.longtasks.push(e.duration);
}).observe({ type: "longtask", buffered: true });
// Time the view's rendering: it draws in animation-frame callbacks.
window.frames = [];
const raf = window.requestAnimationFrame.bind(window);
window.requestAnimationFrame = (fn) => raf((t) => {
  const start = performance.now();
  try { fn(t); } finally { window.frames.push(performance.now() - start); }
});
</script>
<script type="module">
import { views } from "./runtime.js"; // its stylesheet comes with it
window.mountView = (state) => {
  const handlers = {};
  const model = {
    get: (key) => (key === "state" ? state : undefined),
    set() {},
    save_changes() {},
    send() {},
    on: (name, fn) => { (handlers[name] ||= []).push(fn); },
    off() {},
  };
  const el = document.getElementById("view");
  const destroy = views.%(entry)s.render({ model, el });
  return {
    feed: (msg) => (handlers["msg:custom"] || []).forEach((fn) => fn(msg)),
    destroy,
  };
};
window.ready = true;
</script>
"""


@contextlib.contextmanager
def serve(static: Path, entry: str) -> Iterator[str]:
    """An HTTP server for a page that shows the ``entry`` view of ``static``/runtime.js; yields
    the page URL."""
    with tempfile.TemporaryDirectory(prefix="ipyagent-bench-") as tmp:
        for name in ("runtime.js",):
            shutil.copy(static / name, Path(tmp) / name)
        (Path(tmp) / "index.html").write_text(PAGE % {"entry": entry})
        handler = functools.partial(_QuietHandler, directory=tmp)
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}/index.html"
        finally:
            server.shutdown()
            server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def chromium_page(url: str) -> Iterator[tuple[Any, Any]]:
    """A fresh Chromium page on ``url`` with the view module loaded, and its CDP session."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.goto(url)
            page.wait_for_function("window.ready === true && typeof window.mountView === 'function'")
            cdp = page.context.new_cdp_session(page)
            cdp.send("Performance.enable")
            yield page, cdp
        finally:
            browser.close()


# Chromium's cumulative main-thread seconds: all tasks, and the script, style and layout in them.
METRICS = ("TaskDuration", "ScriptDuration", "RecalcStyleDuration", "LayoutDuration")


def main_thread_seconds(cdp: Any) -> dict[str, float]:
    metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    return {name: float(metrics[name]) for name in METRICS}


# -- the texts that stream ------------------------------------------------------------------------

WORDS = [
    *[
        "the",
        "model",
        "writes",
        "text",
        "into",
        "a",
        "notebook",
        "while",
        "the",
        "user",
        "reads",
        "and",
        "the",
        "view",
        "keeps",
        "up",
    ],
    *[
        "with",
        "every",
        "token",
        "that",
        "arrives",
        "from",
        "the",
        "kernel",
        "over",
        "the",
        "comm",
        "channel",
        "in",
        "small",
        "batches",
    ],
]


def _sentence(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(6, 16))]
    if rng.random() < 0.3:
        words[rng.randrange(len(words))] = f"`{rng.choice(WORDS)}_{rng.randint(1, 99)}`"
    if rng.random() < 0.2:
        words[rng.randrange(len(words))] = f"**{rng.choice(WORDS)}**"
    return " ".join(words).capitalize() + "."


def _code_lines(rng: random.Random) -> Iterator[str]:
    n = 0
    while True:
        n += 1
        yield f"def step_{n}(values, limit={rng.randint(1, 99)}):"
        yield f'    """Scale the values of batch {n}."""'
        yield "    total = 0"
        yield "    for i, v in enumerate(values):"
        yield f"        if v > limit:  # clip at {rng.randint(1, 9)}"
        yield f"            total += v * {rng.random():.3f}"
        yield f"    return {{'total': total, 'name': \"step_{n}\"}}"
        yield ""


def code(size: int, rng: random.Random) -> str:
    out = "Here is the module:\n\n```python\n"
    lines = _code_lines(rng)
    while len(out) < size:
        out += next(lines) + "\n"
    return out + "```\n"


def table(size: int, rng: random.Random) -> str:
    out = "| # | name | value | note |\n|---:|---|---:|---|\n"
    n = 0
    while len(out) < size:
        n += 1
        out += f"| {n} | `item_{n}` | {rng.random() * 1000:.2f} | {_sentence(rng)} |\n"
    return out


def bullets(size: int, rng: random.Random) -> str:
    out = ""
    while len(out) < size:
        out += f"- {_sentence(rng)}\n"
    return out


def paragraph(size: int, rng: random.Random) -> str:
    out = ""
    while len(out) < size:
        out += _sentence(rng) + " "
    return out.rstrip() + "\n"


def mix(size: int, rng: random.Random) -> str:
    out = ""
    n = 0
    while len(out) < size:
        n += 1
        out += f"## Part {n}\n\n{paragraph(600, rng)}\n"
        out += code(1500, rng) + "\n" + bullets(500, rng) + "\n" + table(800, rng) + "\n"
    return out


SHAPES: dict[str, Callable[[int, random.Random], str]] = {
    "code": code,
    "table": table,
    "list": bullets,
    "paragraph": paragraph,
    "mix": mix,
}

# -- the run view, streaming -----------------------------------------------------------------------

STREAM_JS = """async ({ text, chunk, interval, maxLag }) => {
  window.longtasks.length = 0;
  const view = window.mountView({ seq: 0, status: "running", blocks: [], usage: {}, live: true });
  let seq = 0;
  const send = (patches) => view.feed({ kind: "patches", seq: ++seq, patches });
  send([{ op: "add", block: { id: "t", kind: "text", text: "", streaming: true } }]);
  const start = performance.now();
  let sent = 0, lagged = false;
  while (sent < text.length) {
    const due = start + ((sent / chunk) + 1) * interval;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    else if (-wait > maxLag * 1000) { lagged = true; break; }
    send([{ op: "append", id: "t", field: "text", value: text.slice(sent, sent + chunk) }]);
    sent += chunk;
  }
  await new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));
  const streamFrames = window.frames.splice(0);
  send([
    { op: "set", id: "t", fields: { streaming: false } },
    { op: "top", fields: { status: "completed" } },
  ]);
  await new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));
  const finalFrame = Math.max(0, ...window.frames.splice(0));
  await new Promise((r) => setTimeout(r, 100)); // let the longtask observer report
  return {
    sent: Math.min(sent, text.length),
    lagged,
    wall: (performance.now() - start) / 1000,
    maxFrame: Math.max(0, ...streamFrames),
    finalFrame,
    longtasks: window.longtasks.slice(),
    nodes: document.getElementById("view").querySelectorAll("*").length,
  };
}"""


def stream_case(page: Any, cdp: Any, text: str, *, rate_kb: float, max_lag: float) -> dict[str, Any]:
    chunk = max(1, round(rate_kb * 1024 * INTERVAL_MS / 1000))
    before = main_thread_seconds(cdp)
    result: dict[str, Any] = page.evaluate(
        STREAM_JS, {"text": text, "chunk": chunk, "interval": INTERVAL_MS, "maxLag": max_lag}
    )
    after = main_thread_seconds(cdp)
    result.update({name: after[name] - before[name] for name in METRICS})
    result["busy"] = result["TaskDuration"]
    return result


def bench_run_view(
    static: Path, shapes: list[str], sizes_kb: list[int], *, rate_kb: float, max_lag: float
) -> list[list[Any]]:
    rows = []
    with serve(static, "run") as url:
        for shape in shapes:
            for size_kb in sizes_kb:
                text = SHAPES[shape](size_kb * 1024, random.Random(size_kb))
                with chromium_page(url) as (page, cdp):
                    r = stream_case(page, cdp, text, rate_kb=rate_kb, max_lag=max_lag)
                kb = r["sent"] / 1024
                rows.append(
                    [
                        shape,
                        size_kb,
                        f"{kb:.0f}" + (" (fell behind)" if r["lagged"] else ""),
                        round(r["wall"], 1),
                        round(100 * r["busy"] / max(r["wall"], 1e-9)),
                        round(1000 * r["busy"] / max(kb, 1e-9), 2),
                        round(1000 * r["ScriptDuration"] / max(kb, 1e-9), 2),
                        round(1000 * r["RecalcStyleDuration"] / max(kb, 1e-9), 2),
                        round(1000 * r["LayoutDuration"] / max(kb, 1e-9), 2),
                        round(max(r["longtasks"], default=0)),
                        len(r["longtasks"]),
                        round(r["maxFrame"], 1),
                        round(r["finalFrame"], 1),
                        r["nodes"],
                    ]
                )
                print(*rows[-1], sep=" | ", flush=True)
    return rows


RUN_VIEW_COLUMNS = [
    "shape",
    "size KB",
    "streamed KB",
    "wall s",
    "busy %",
    "main ms/KB",
    "script ms/KB",
    "style ms/KB",
    "layout ms/KB",
    "longest task ms",
    "tasks >50ms",
    "longest frame ms",
    "final render ms",
    "DOM nodes",
]

# -- the chat (bench/browser_chat.py measures opening a long history) ------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10,100,1000", help="KB, comma-separated")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--rate", type=float, default=20.0, help="KB/s streamed (default 20)")
    parser.add_argument("--max-lag", type=float, default=10.0, help="seconds behind before a case stops")
    parser.add_argument("--static", type=Path, default=STATIC, help="folder with runtime.js")
    parser.add_argument("--name", default="browser", help="results file name (bench/results/NAME.json)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    shapes = args.shapes.split(",")
    rows = bench_run_view(args.static, shapes, sizes, rate_kb=args.rate, max_lag=args.max_lag)
    report(
        args.name,
        RUN_VIEW_COLUMNS,
        rows,
        {"rate_kb_s": args.rate, "interval_ms": INTERVAL_MS, "static": str(args.static), "driver": "page"},
    )


if __name__ == "__main__":
    main()
