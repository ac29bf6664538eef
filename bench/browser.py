"""What the browser spends on a streaming answer and on opening a long chat, in a real Chromium.

No kernel and no JupyterLab: a page loads the bundled views (ipyagent/widgets/static/runtime.js,
or --static's) with a stand-in for the anywidget model and gives it what the kernel would send.

Section "stream" (the run view). The page feeds the `patches` messages the kernel sends
(docs/widget-protocol.md): an `add` of a streaming text block, one `append` every 50 ms (the
kernel's batching interval) at a steady rate, then `set streaming=false` and the final status.
(The view draws streaming text at most every 100 ms: js/src/common.js STREAM_REDRAW_MS.)
For each shape (code block, table, list, one long paragraph, a mix; and nested: a code block in a
list item, a table and a paragraph in a quote) and size: the main-thread time
(Chromium's TaskDuration from CDP ``Performance.getMetrics``: script, style, layout, paint and the
rest; and script, style and layout on their own) as a share of the wall time and per KB streamed,
the longest task (PerformanceObserver ``longtask``, which only sees tasks over 50 ms), the longest
animation-frame callback (where the view renders), the final render and the view's DOM node count.
Each case runs in a fresh page, after a warm-up stream of a few KB in that page (a notebook has
rendered something before). A case that falls behind by more than --max-lag seconds stops early.
With --trace, a Chrome trace of each case says what its long tasks were (bench/_trace.py): the
time the thread ran in each, and the events that took it (a frame's script, layout, a garbage
collection); a long task whose thread ran a few ms is the machine's other load, not the page.

Section "chat" (the chat widget). What the model holds and receives is taken from a real
:class:`~ipyagent.widgets.ChatWidget` built here on a saved conversation of N messages: its synced
traits at creation (the open), then, for one turn (a scripted model, streamed in chunks), every
custom message and trait write, replayed in order. Not measured: the websocket, the widget
manager's own parsing of the traits.
- open ms (after a warm-up render of a short chat in the same page): from ``render()`` to the
  end of the first frame after it (the first paint);
- longest task: the longest main-thread task over 50 ms ("-" = none) from the open until
  ``--settle`` seconds later;
- DOM nodes / blocks shown: after those seconds; scroll-up task: the longest task while the
  transcript is scrolled to its top five times (older turns load);
- turn ms: the main-thread time of one new turn (each message parsed from JSON and handled, its
  redraw run and laid out, summed); max step: the most expensive of those steps;
- each size is measured ``--repeat`` times, each in a fresh page; the table shows medians, the
  JSON every run.

    python bench/browser.py [stream|chat|all] [--sizes 10,100,1000] [--rate 4] [--shapes ...] [--trace]
                            [--messages 100,2000,10000] [--static DIR] [--name browser]

Prints one table per section and writes both to bench/results/NAME.json. --static points at
another build's bundles (say the main branch's) to compare. Needs Debian's chromium at
/usr/bin/chromium and Playwright (never ``playwright install``). The machine's other load shows
in every number: compare runs made back to back.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import functools
import http.server
import json
import random
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import _trace
from _chromium import CHROMIUM, FLAGS
from _report import report_sections

ROOT = Path(__file__).resolve().parent.parent
STATIC = ROOT / "ipyagent" / "widgets" / "static"
INTERVAL_MS = 50  # the kernel sends at most one patches message per ~50 ms

# -- section "stream": a page with the run view and a stand-in model -------------------------------

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


def _indented(text: str, prefix: str, first: str | None = None) -> str:
    """``text`` with every line after ``prefix`` (the first after ``first``, if given)."""
    lines = text.rstrip("\n").split("\n")
    head = prefix if first is None else first
    rest = [prefix + line if line else prefix.rstrip() for line in lines[1:]]
    return "\n".join([head + lines[0], *rest]) + "\n"


def item_code(size: int, rng: random.Random) -> str:
    """A list whose second item holds a long code block (indented under the item)."""
    return "- First, the data.\n" + _indented(code(size, rng), "  ", "- ")


def quote_table(size: int, rng: random.Random) -> str:
    """A long table inside a blockquote."""
    return _indented(table(size, rng), "> ")


def quote_paragraph(size: int, rng: random.Random) -> str:
    """One long paragraph inside a blockquote (one line, as a model writes it)."""
    return _indented(paragraph(size, rng), "> ")


SHAPES: dict[str, Callable[[int, random.Random], str]] = {
    "code": code,
    "table": table,
    "list": bullets,
    "paragraph": paragraph,
    "mix": mix,
    "item-code": item_code,
    "quote-table": quote_table,
    "quote-paragraph": quote_paragraph,
}

# -- the run view, streaming -----------------------------------------------------------------------

STREAM_JS = """async ({ text, chunk, interval, maxLag }) => {
  const view = window.mountView({ seq: 0, status: "running", blocks: [], usage: {}, live: true });
  let seq = 0;
  const send = (patches) => view.feed({ kind: "patches", seq: ++seq, patches });
  send([{ op: "add", block: { id: "t", kind: "text", text: "", streaming: true } }]);
  await new Promise((r) => setTimeout(r, 500)); // the warm-up's last frames, long tasks reported
  window.longtasks.length = 0;
  window.frames.length = 0;
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


def stream_case(
    page: Any, cdp: Any, text: str, *, rate_kb: float, max_lag: float, trace: bool = False
) -> dict[str, Any]:
    # Warm-up, not measured: the first render in a page compiles the bundle's code paths.
    warm = {"text": mix(16384, random.Random(0)), "chunk": 800, "interval": 50, "maxLag": 100}
    page.evaluate(STREAM_JS, warm)
    chunk = max(1, round(rate_kb * 1024 * INTERVAL_MS / 1000))
    if trace:
        _trace.start(cdp)
    before = main_thread_seconds(cdp)
    result: dict[str, Any] = page.evaluate(
        STREAM_JS, {"text": text, "chunk": chunk, "interval": INTERVAL_MS, "maxLag": max_lag}
    )
    after = main_thread_seconds(cdp)
    result.update({name: after[name] - before[name] for name in METRICS})
    result["busy"] = result["TaskDuration"]
    if trace:
        result["traced_long_tasks"] = _trace.long_tasks(_trace.stop(page, cdp))
    return result


def bench_stream(
    static: Path, shapes: list[str], sizes_kb: list[int], *, rate_kb: float, max_lag: float, trace: bool
) -> tuple[list[list[Any]], list[Any]]:
    rows = []
    traced = []
    with serve(static, "run") as url:
        for shape in shapes:
            for size_kb in sizes_kb:
                text = SHAPES[shape](size_kb * 1024, random.Random(size_kb))
                with chromium_page(url) as (page, cdp):
                    r = stream_case(page, cdp, text, rate_kb=rate_kb, max_lag=max_lag, trace=trace)
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
                if trace:
                    traced.append({"shape": shape, "size_kb": size_kb, "long_tasks": r["traced_long_tasks"]})
                    for task in r["traced_long_tasks"]:
                        cost = f"{task['wall_ms']} ms, thread {task['thread_ms']} ms:"
                        print("    long task", cost, *task["top"], flush=True)
    return rows, traced


STREAM_COLUMNS = [
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

# -- section "chat": opening a long history, then one turn ----------------------------------------

ORIGIN = "http://bench.invalid"

CHAT_PAGE = """<!doctype html><html><head><meta charset="utf-8">
</head>
<body style="margin:0"><div id="out" style="width:900px;padding:8px"></div>
<script type="module">
import { views } from "/runtime.js"; // its stylesheet comes with it
const chat = views.chat;
class Model {
  constructor(values) { this.values = values; this.handlers = new Map(); }
  get(key) { return this.values[key]; }
  on(event, fn) {
    if (!this.handlers.has(event)) this.handlers.set(event, []);
    this.handlers.get(event).push(fn);
  }
  off(event, fn) {
    const list = this.handlers.get(event) || [];
    if (list.includes(fn)) list.splice(list.indexOf(fn), 1);
  }
  send() {}
  emit(event, ...args) { for (const fn of [...(this.handlers.get(event) || [])]) fn(...args); }
  write(key, value) { this.values[key] = value; this.emit(`change:${key}`); }
}
window.longTasks = [];
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) window.longTasks.push([e.startTime, e.duration]);
}).observe({ type: "longtask", buffered: true });
const frame = () => new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));
window.openChat = async () => {
  const data = await (await fetch("/data.json")).json();
  window.turn = data.turn;
  window.model = new Model(data.initial);
  // Warm-up (not measured): the first render compiles the bundle's code paths once per page.
  const spare = document.createElement("div");
  document.body.append(spare);
  chat.render({ model: new Model(data.warmup), el: spare });
  await frame();
  spare.remove();
  const t0 = performance.now();
  window.since = t0; // entries arrive late: the warm-up's own are told apart by their start
  chat.render({ model: window.model, el: document.getElementById("out") });
  await frame();
  return performance.now() - t0;
};
window.replayTurn = () => {
  // Redraws wait for an animation frame; here each step runs its frame at once, so the time
  // measured is the work itself, not the wait for the next frame.
  const real = window.requestAnimationFrame;
  let queue = [];
  window.requestAnimationFrame = (fn) => { queue.push(fn); return queue.length; };
  let total = 0, worst = 0;
  try {
    for (const step of window.turn) {
      const t0 = performance.now();
      if (step[0] === "msg") window.model.emit("msg:custom", JSON.parse(step[1]), []);
      else window.model.write(step[1], JSON.parse(step[2]));
      while (queue.length) { const q = queue; queue = []; for (const fn of q) fn(performance.now()); }
      document.getElementById("out").getBoundingClientRect();
      document.body.offsetHeight;
      const spent = performance.now() - t0;
      total += spent; worst = Math.max(worst, spent);
    }
  } finally { window.requestAnimationFrame = real; }
  return { total, worst };
};
window.takeLongTasks = () => {
  const mine = window.longTasks
    .filter(([start, d]) => start + d > window.since)
    .map(([start, d]) => [Math.round(start - window.since), d]);
  window.longTasks = [];
  window.since = performance.now();
  return mine;
};
window.counts = () => ({
  nodes: document.getElementsByTagName("*").length,
  blocks: document.querySelectorAll(".ipyagent-block").length,
});
window.scrollTop = () => {
  const el = document.querySelector(".ipyagent-blocks");
  el.scrollTop = 0;
  el.dispatchEvent(new Event("scroll"));
};
window.pageReady = true;
</script></body></html>"""


def conversation(count: int) -> list[Any]:
    """``count`` saved messages shaped like an agent's: questions, markdown answers (some with
    code), and every fourth exchange a tool call with its result."""
    from ipyagent.agentlib.messages import Message, TextBlock, ToolCallBlock, ToolResultBlock

    messages: list[Any] = []
    i = 0
    while len(messages) < count:
        messages.append(Message.user(f"Question {i}: how do I load `data_{i}.csv` and plot column {i}?"))
        if i % 4 == 3 and len(messages) + 2 < count:
            call = ToolCallBlock.from_raw(
                id=f"call_{i}", name="run_python", raw_arguments=json.dumps({"code": f"df{i}.describe()"})
            )
            messages.append(Message(role="assistant", content=(call,)))
            result = ToolResultBlock(tool_call_id=call.id, name=call.name, content=f"count {i}\nmean 4.2")
            messages.append(Message(role="user", content=(result,)))
        code = f"\n\n```python\nimport pandas as pd\ndf = pd.read_csv('data_{i}.csv')\ndf[{i}].plot()\n```"
        answer = (
            f"Read it with **pandas**, then plot column `{i}`. The file has a header row, so "
            f"`read_csv` picks the names up; see [the docs](https://pandas.pydata.org)."
            + (code if i % 2 == 0 else "\n\n- one\n- two\n- three")
        )
        messages.append(Message(role="assistant", content=(TextBlock(text=answer),)))
        i += 1
    return messages[:count]


def kernel_side(count: int) -> dict[str, Any]:
    """What the kernel sends: the traits at creation, then one turn's messages and writes."""
    from ipyagent.agentlib.agent import Agent
    from ipyagent.testing import ScriptedModel
    from ipyagent.widgets import ChatWidget

    reply = "Here is the plot. " * 12 + "\n\n```python\ndf.plot()\n```\n\nDone."
    model = ScriptedModel([reply], chunk_size=24, delay=0.01)
    agent = Agent(model=model, messages=conversation(count))
    widget = ChatWidget(agent)
    synced = [name for name in widget.keys if name in ("state", "history", "models")]
    initial = {name: copy.deepcopy(getattr(widget, name)) for name in synced}
    steps: list[list[Any]] = []

    # Sent as JSON text: the page parses each one inside the timed step, as the widget manager
    # must parse every comm message (a trait rewritten whole costs its whole size again).
    def send(content: Any, buffers: Any = None) -> None:
        steps.append(["msg", json.dumps(content)])

    widget.send = widget.throttle._send = send  # type: ignore[method-assign]
    widget.observe(
        lambda change: steps.append(["trait", change["name"], json.dumps(change["new"])]),
        names=[name for name in synced if name != "models"],
    )
    widget.submit("And the mean?")
    widget.wait(60)
    widget.close()
    return {"initial": initial, "turn": steps}


def warmup() -> dict[str, Any]:
    from ipyagent.agentlib.agent import Agent
    from ipyagent.testing import ScriptedModel
    from ipyagent.widgets import ChatWidget

    widget = ChatWidget(Agent(model=ScriptedModel(["ok"]), messages=conversation(8)))
    names = [name for name in widget.keys if name in ("state", "history")]
    values = {name: copy.deepcopy(getattr(widget, name)) for name in names}
    widget.close()
    return values


def chat_case(browser: Any, static: Path, count: int, settle: float) -> dict[str, Any]:
    data = json.dumps({**kernel_side(count), "warmup": warmup()})
    files = {
        "/": ("text/html", CHAT_PAGE),
        "/runtime.js": ("text/javascript", (static / "runtime.js").read_text()),
        "/data.json": ("application/json", data),
    }
    context = browser.new_context(viewport={"width": 1000, "height": 900})
    page = context.new_page()

    def serve(route: Any) -> None:
        path = route.request.url[len(ORIGIN) :] or "/"
        kind, body = files[path]
        route.fulfill(status=200, content_type=kind, body=body)

    page.route(f"{ORIGIN}/**", serve)
    page.goto(f"{ORIGIN}/")
    page.wait_for_function("() => window.pageReady === true")
    open_ms = page.evaluate("() => window.openChat()")
    page.wait_for_timeout(settle * 1000)
    open_tasks = page.evaluate("() => window.takeLongTasks()")
    counts = page.evaluate("() => window.counts()")
    for _ in range(5):
        page.evaluate("() => window.scrollTop()")
        page.wait_for_timeout(300)
    scroll_tasks = page.evaluate("() => window.takeLongTasks()")
    after_scroll = page.evaluate("() => window.counts()")
    turn = page.evaluate("() => window.replayTurn()")
    context.close()
    return {
        "messages": count,
        "data_kb": round(len(data) / 1024),
        "open_ms": round(open_ms, 1),
        "longest_task_ms": max(d for _, d in open_tasks) if open_tasks else None,
        "open_long_tasks": open_tasks,
        "dom_nodes": counts["nodes"],
        "blocks_shown": counts["blocks"],
        "scroll_longest_task_ms": max(d for _, d in scroll_tasks) if scroll_tasks else None,
        "scroll_long_tasks": scroll_tasks,
        "blocks_after_scroll": after_scroll["blocks"],
        "turn_ms": round(turn["total"], 1),
        "turn_max_step_ms": round(turn["worst"], 1),
        "turn_steps": len(json.loads(data)["turn"]),
    }


def bench_chat(static: Path, counts: list[int], *, settle: float, repeat: int) -> tuple[list[Any], list[Any]]:
    from playwright.sync_api import sync_playwright

    runs = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            for count in counts:
                for _ in range(repeat):
                    runs.append(chat_case(browser, static, count, settle))
                    print(runs[-1], flush=True)
        finally:
            browser.close()
    table = []
    for count in counts:
        mine = [run for run in runs if run["messages"] == count]
        table.append([_median([run[k] for run in mine]) for k in CHAT_KEYS])
    return table, runs


CHAT_COLUMNS = [
    "messages",
    "open ms",
    "longest task ms",
    "DOM nodes",
    "blocks shown",
    "scroll-up task ms",
    "turn ms",
    "turn max step ms",
]
CHAT_KEYS = [
    "messages",
    "open_ms",
    "longest_task_ms",
    "dom_nodes",
    "blocks_shown",
    "scroll_longest_task_ms",
    "turn_ms",
    "turn_max_step_ms",
]


def _median(values: list[Any]) -> Any:
    """The median, counting "no long task" (None) as 0 ms; "-" when most runs had none."""
    numbers = sorted(0 if v is None else v for v in values)
    middle = numbers[len(numbers) // 2]
    return "-" if middle == 0 and None in values else middle


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("section", nargs="?", choices=["stream", "chat", "all"], default="all")
    parser.add_argument("--sizes", default="10,100,1000", help="stream: KB, comma-separated")
    parser.add_argument("--shapes", default=",".join(SHAPES), help="stream: shapes, comma-separated")
    parser.add_argument("--rate", type=float, default=4.0, help="stream: KB/s streamed (default 4)")
    parser.add_argument(
        "--trace",
        action="store_true",
        help="stream: record a Chrome trace and say what each long task was (its thread time: "
        "the rest of its wall time the thread waited for a CPU)",
    )
    parser.add_argument("--max-lag", type=float, default=10.0, help="stream: seconds behind to stop at")
    parser.add_argument("--messages", default="100,2000,10000", help="chat: history sizes, comma-separated")
    parser.add_argument("--settle", type=float, default=3.0, help="chat: seconds to watch after the open")
    parser.add_argument("--repeat", type=int, default=3, help="chat: runs per size (the table shows medians)")
    parser.add_argument("--static", type=Path, default=STATIC, help="folder with the runtime.js to measure")
    parser.add_argument("--name", default="browser", help="results file name (bench/results/NAME.json)")
    args = parser.parse_args()
    if not Path(CHROMIUM).exists():
        raise SystemExit(f"{CHROMIUM} is missing: apt-get install chromium (see tests/browser/conftest.py)")
    sections = []
    extra: dict[str, Any] = {"static": str(args.static), "driven": "bundled views, no kernel"}
    if args.section in ("stream", "all"):
        rows, traced = bench_stream(
            args.static,
            args.shapes.split(","),
            [int(s) for s in args.sizes.split(",")],
            rate_kb=args.rate,
            max_lag=args.max_lag,
            trace=args.trace,
        )
        sections.append(("stream", STREAM_COLUMNS, rows))
        extra.update(rate_kb_s=args.rate, interval_ms=INTERVAL_MS)
        if args.trace:
            extra["traced_long_tasks"] = traced
    if args.section in ("chat", "all"):
        table, runs = bench_chat(
            args.static, [int(s) for s in args.messages.split(",")], settle=args.settle, repeat=args.repeat
        )
        sections.append(("chat", CHAT_COLUMNS, table))
        extra["chat_runs"] = runs
    report_sections(args.name, sections, extra)


if __name__ == "__main__":
    main()
