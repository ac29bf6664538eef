"""What one redraw costs the browser, apart from the views: the floor under js/src/common.js's
STREAM_REDRAW_MS and parts.js's PARA_WHOLE.

In a blank page of Debian's Chromium (no views, no markdown):
- "redraw": for 10 s, every 50 ms (the kernel's interval) or 100 ms, nothing is changed, one
  character or 200 characters are appended to a <pre>; the main thread's share of the wall time
  (CDP ``Performance.getMetrics`` TaskDuration). What a frame costs however little changed.
- "paragraph": a <p> of N KB, 200 characters appended and its layout forced, 21 times (median
  and least ms). What a streaming paragraph laid out whole costs on each redraw.

    python bench/browser_frame.py

Prints both tables and writes bench/results/browser_frame.json. The machine's load shows in the
numbers (`uptime` is printed with them).
"""

from __future__ import annotations

import os
import time
from typing import Any

from _chromium import CHROMIUM, FLAGS
from _report import report_sections

REDRAW_JS = """async ({ mode, interval, seconds }) => {
  document.body.innerHTML = '<div style="width:900px;font:14px monospace"><pre id=p></pre></div>';
  const p = document.getElementById("p");
  const chunk = "x = compute(values, limit=42)  # a line of code\\n".repeat(5).slice(0, 200);
  const end = performance.now() + seconds * 1000;
  while (performance.now() < end) {
    await new Promise((r) => setTimeout(r, interval));
    if (mode === "1 character") p.append("x");
    else if (mode === "200 characters") p.append(chunk);
  }
}"""

APPEND_JS = """({ kb, reps }) => {
  document.body.innerHTML =
    '<div style="width:900px;font:14px sans-serif"><p id=p></p><div id=after>x</div></div>';
  const p = document.getElementById("p");
  const words = "lorem ipsum dolor sit amet, consectetur adipiscing elit. ";
  p.append(words.repeat(Math.ceil((kb * 1024) / words.length)));
  const after = document.getElementById("after");
  after.getBoundingClientRect();
  const times = [];
  for (let i = 0; i < reps; i++) {
    const t0 = performance.now();
    p.append(words.repeat(4).slice(0, 200));
    after.getBoundingClientRect();
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  return { median: times[reps >> 1], least: times[0] };
}"""


def task_seconds(cdp: Any) -> float:
    metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    return float(metrics["TaskDuration"])


def main() -> None:
    from playwright.sync_api import sync_playwright

    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    redraws: list[list[Any]] = []
    paragraphs: list[list[Any]] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        for interval in (50, 100):
            for mode in ("nothing", "1 character", "200 characters"):
                page = browser.new_page(viewport={"width": 1280, "height": 1000})
                cdp = page.context.new_cdp_session(page)
                cdp.send("Performance.enable")
                busy, wall = task_seconds(cdp), time.perf_counter()
                page.evaluate(REDRAW_JS, {"mode": mode, "interval": interval, "seconds": 10})
                share = (task_seconds(cdp) - busy) / (time.perf_counter() - wall)
                redraws.append([interval, mode, round(100 * share, 1)])
                page.close()
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        for kb in (4, 8, 16, 32, 64, 128):
            r = page.evaluate(APPEND_JS, {"kb": kb, "reps": 21})
            paragraphs.append([kb, round(r["median"], 1), round(r["least"], 1)])
        browser.close()
    report_sections(
        "browser_frame",
        [
            ("redraw", ["every ms", "appended", "main thread busy %"], redraws),
            ("paragraph", ["<p> KB", "append + layout ms: median", "least"], paragraphs),
        ],
        {"load_before": load},
    )


if __name__ == "__main__":
    main()
