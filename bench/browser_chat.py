"""The chat widget's cost in a real browser: opening on a long history, and one new turn.

    python bench/browser_chat.py [--sizes 10,100,2000,10000] [--settle 3]

Headless Debian Chromium (/usr/bin/chromium) driven by Playwright, no JupyterLab and no kernel:
the page loads the bundled runtime (``runtime.js``: the chat view and its stylesheet) from the
installed package and gives it a stand-in for the anywidget model. What the model holds and
receives is what the kernel would send, taken from a real :class:`~ipyagent.widgets.ChatWidget`
built here on a saved conversation of N messages: its synced traits at creation (the open),
then, for one turn (a scripted model, streamed in chunks), every custom message and trait write,
replayed in order.
Not measured: the websocket, the widget manager's own parsing of the traits.

- open ms (after a warm-up render of a short chat in the same page): from ``render()`` to the
  end of the first frame after it (the first paint);
- longest task: the longest main-thread task (PerformanceObserver ``longtask``, which reports
  only tasks over 50 ms; "-" = none) from the open until ``--settle`` seconds later;
- DOM nodes / blocks shown: after those seconds; scroll-up task: the longest task while the
  transcript is scrolled to its top five times (older turns load);
- each size is measured ``--repeat`` times, each in a fresh page; the table shows medians (the
  machine's other load makes single runs noisy), the JSON every run;
- turn ms: the main-thread time of one new turn (each message parsed from JSON and handled, its
  redraw run and laid out, summed); max step: the most expensive of those steps.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path
from typing import Any

from _chromium import CHROMIUM, FLAGS
from _report import report

ORIGIN = "http://bench.invalid"

PAGE = """<!doctype html><html><head><meta charset="utf-8">
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


def measure(browser: Any, count: int, settle: float) -> dict[str, Any]:
    from ipyagent.widgets.views import STATIC

    data = json.dumps({**kernel_side(count), "warmup": warmup()})
    files = {
        "/": ("text/html", PAGE),
        "/runtime.js": ("text/javascript", (STATIC / "runtime.js").read_text()),
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


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="10,100,2000,10000")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds to watch after the open")
    parser.add_argument("--repeat", type=int, default=3, help="runs per size; the table shows medians")
    parser.add_argument("--name", default="browser_chat", help="results file name (bench/results/NAME.json)")
    args = parser.parse_args()
    if not Path(CHROMIUM).exists():
        sys.exit(f"{CHROMIUM} is missing: apt-get install chromium (see tests/browser/conftest.py)")
    from playwright.sync_api import sync_playwright

    import ipyagent

    rows = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            for size in [int(s) for s in args.sizes.split(",")]:
                for _ in range(args.repeat):
                    rows.append(measure(browser, size, args.settle))
                    print(rows[-1], flush=True)
        finally:
            browser.close()
    columns = [
        "messages",
        "open ms",
        "longest task ms",
        "DOM nodes",
        "blocks shown",
        "scroll-up task ms",
        "turn ms",
        "turn max step ms",
    ]
    keys = [
        "messages",
        "open_ms",
        "longest_task_ms",
        "dom_nodes",
        "blocks_shown",
        "scroll_longest_task_ms",
        "turn_ms",
        "turn_max_step_ms",
    ]
    table = []
    for size in dict.fromkeys(row["messages"] for row in rows):
        runs = [row for row in rows if row["messages"] == size]
        table.append([_median([run[k] for run in runs]) for k in keys])
    report(
        args.name,
        columns,
        table,
        {
            "package": str(Path(ipyagent.__file__).parent),
            "driven": "bundled runtime.js (chat), no kernel",
            "runs": rows,
        },
    )


def _median(values: list[Any]) -> Any:
    """The median, counting "no long task" (None) as 0 ms; "-" when most runs had none."""
    numbers = sorted(0 if v is None else v for v in values)
    middle = numbers[len(numbers) // 2]
    return "-" if middle == 0 and None in values else middle


if __name__ == "__main__":
    main()
