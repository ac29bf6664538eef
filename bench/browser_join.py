"""What joining a streamed paragraph or table again costs the browser, by size (js/src/parts.js).

A paragraph or a table streams in parts (each laid out on its own) and, once complete, is joined
into one block again, so that it shows as rendering the whole text at once shows it, if it is at
most PARA_JOIN characters or TABLE_JOIN rows; past those it stays in parts. The join is one
task: moving the parts' content back into one element, then laying out the whole block (a
paragraph's lines are broken all over again; a table's columns are sized by all its rows). This
says how long that task is at each size, to choose the two limits (no task over 50 ms).

In a fresh page per case (the bundled run view, as bench/browser.py drives it), the text streams
in (a paragraph or a table of bench/browser.py's shapes, big chunks, each drawn) and is left
streaming, so that it stays in parts at any size; then the page does what the join does (the
same DOM operations as Parts.unsplit and TableParts.unsplit) and forces the layout that follows,
timed together, --repeat times (the least, the median and the most: on a loaded machine the
least is the closest to the work itself, the rest of the time the thread waited for a CPU).
Script, style and layout, not paint (a browser paints only what is on screen).

    python bench/browser_join.py [--para-kb 64,128,256,512,1024] [--rows 100,200,300,500,1000,2000]

Prints a table and writes bench/results/browser_join.json. The machine's other load shows in the
numbers (`uptime` is printed with them).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
from typing import Any

from _report import report
from browser import STATIC, chromium_page, paragraph, serve, table

JOIN_JS = """async ({ text, chunk, kind, repeat }) => {
  const view = window.mountView({ seq: 0, status: "running", blocks: [], usage: {}, live: true });
  let seq = 0;
  const send = (patches) => view.feed({ kind: "patches", seq: ++seq, patches });
  const frame = () => new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));
  send([{ op: "add", block: { id: "t", kind: "text", text: "", streaming: true } }]);
  for (let at = 0; at < text.length; at += chunk) {
    send([{ op: "append", id: "t", field: "text", value: text.slice(at, at + chunk) }]);
    await frame();
  }
  await new Promise((r) => setTimeout(r, 200)); // streaming text waits up to 100 ms to be drawn
  await frame();
  const md = document.querySelector("#view .ipyagent-md");
  const parts = md.querySelectorAll(".ipyagent-part").length;
  // What Parts.unsplit and TableParts.unsplit do (js/src/parts.js), on a copy each time.
  const join = (root) => {
    if (kind === "p") {
      const p = root.querySelector("p");
      const nodes = [];
      for (const shelf of Array.from(p.children)) {
        if (!shelf.classList.contains("ipyagent-shelf")) continue;
        for (const part of Array.from(shelf.children)) nodes.push(...part.childNodes);
      }
      p.replaceChildren(...nodes);
      p.normalize();
      return;
    }
    const whole = root.querySelector(".ipyagent-table");
    const tables = Array.from(whole.querySelectorAll(".ipyagent-rows > table"));
    const body = tables[0].tBodies[0];
    for (const t of tables.slice(1)) body.append(...t.tBodies[0].childNodes);
    tables[0].querySelector(":scope > colgroup").remove();
    whole.replaceWith(tables[0]);
  };
  const times = [];
  for (let i = 0; i < repeat; i++) {
    const copy = md.cloneNode(true);
    md.after(copy);
    copy.getBoundingClientRect(); // the copy laid out in parts first, as the streamed block is
    await new Promise((r) => setTimeout(r, 50));
    const t0 = performance.now();
    join(copy);
    copy.getBoundingClientRect(); // the layout the join causes
    times.push(performance.now() - t0);
    copy.remove();
    await new Promise((r) => setTimeout(r, 50));
  }
  return { parts, times, chars: md.textContent.length, rows: md.querySelectorAll("tr").length - 1 };
}"""


def join_case(url: str, kind: str, text: str, repeat: int) -> dict[str, Any]:
    with chromium_page(url) as (page, _cdp):
        result: dict[str, Any] = page.evaluate(
            JOIN_JS, {"text": text, "chunk": 32768, "kind": kind, "repeat": repeat}
        )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--para-kb", default="64,128,256,512,1024", help="paragraph sizes, KB")
    parser.add_argument("--rows", default="100,200,300,500,1000,2000", help="table sizes, rows")
    parser.add_argument("--repeat", type=int, default=5, help="joins timed per case (the median)")
    args = parser.parse_args()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    cases: list[tuple[str, str, str]] = []
    for kb in (int(s) for s in args.para_kb.split(",")):
        cases.append(("paragraph", f"{kb} KB", paragraph(kb * 1024, random.Random(kb))))
    for rows in (int(s) for s in args.rows.split(",")):
        cases.append(("table", f"{rows} rows", _rows(rows)))
    out = []
    with serve(STATIC, "run") as url:
        for shape, size, text in cases:
            r = join_case(url, "p" if shape == "paragraph" else "table", text, args.repeat)
            out.append(
                [
                    shape,
                    size,
                    round(r["chars"] / 1024),
                    r["rows"] if shape == "table" else "",
                    r["parts"],
                    round(min(r["times"]), 1),
                    round(statistics.median(r["times"]), 1),
                    round(max(r["times"]), 1),
                ]
            )
            print(*out[-1], sep=" | ", flush=True)
    columns = ["shape", "size", "text KB", "rows", "parts", "join ms min", "median", "max"]
    report("browser_join", columns, out, {"repeat": args.repeat, "load_before": load})


def _rows(n: int) -> str:
    """bench/browser.py's table with `n` body rows."""
    size = 64 * n
    while True:
        text = table(size, random.Random(n))
        if text.count("\n") - 2 >= n:
            return "\n".join(text.split("\n")[: n + 2]) + "\n"
        size *= 2


if __name__ == "__main__":
    main()
