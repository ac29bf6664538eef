"""The live-notebook channel's round trip in a real JupyterLab: kernel -> page -> kernel.

    python bench/live_notebook.py [--sizes 10,200,1000] [--pings 50] [--reads 20]

Starts JupyterLab (this Python, ipyagent's extension from ipyagent/labextension), opens in
headless Chromium a notebook of N code cells (each with a 200-character stream output and a
result), loads ipyagent, then a cell measures, while it runs (so every answer reaches a kernel
whose main shell is busy, through the comm's subshell on ipykernel 7):

- ping ms: ``request("ping")``, the protocol's empty request (p50 / p95 over --pings);
- read ms: ``read()``, the whole document as the page shows it, validated into a
  ``LiveDocument`` (p50 / p95 over --reads); KB: the size of one answer;
- read_cells ms: the agent's ``read_cells()`` on the live document: one page (about 20,000
  characters) asked of the page and shown as the tool's text (p50 / p95 over --reads); KB: the
  size of the page's answer.

Prints a table, writes bench/results/live_notebook.json. Needs Debian's chromium and Playwright.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from _chromium import CHROMIUM, FLAGS
from _lab import open_notebook, percentile, run_cell_and_wait, start_lab
from _report import report

MEASURE = """
import json, time
from ipyagent.kernel.extension import kernel_state
live = kernel_state(get_ipython()).live
live.settle()
def timed(fn, n):
    out = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return out
size = len(json.dumps(live.request("read_notebook", {"max_output_chars": 2000})))
page = {"max_output_chars": 1500, "start": 0, "page_chars": 20000}
page_size = len(json.dumps(live.request("read_notebook", page)))
from ipyagent.kernel.tools.notebook import notebook_tools
tools = notebook_tools(get_ipython(), kernel_state(get_ipython()).main, None, live=live)
read_cells = {t.name: t.function for t in tools}["read_cells"]
assert read_cells().startswith("(live document:")
print(json.dumps({"ping": timed(lambda: live.request("ping", {}), %(pings)d),
                  "read": timed(live.read, %(reads)d), "bytes": size,
                  "read_cells": timed(read_cells, %(reads)d), "page_bytes": page_size}))
"""


COLUMNS = [
    "cells", "ping p50 ms", "ping p95 ms", "read p50 ms", "read p95 ms", "KB",
    "read_cells p50 ms", "read_cells p95 ms", "page KB",
]  # fmt: skip


def notebook(path: Path, cells: int, pings: int, reads: int) -> None:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    filler = []
    for i in range(cells):
        source = f"value_{i} = {i} * 2\nprint('x' * 200)\nvalue_{i}"
        cell = nbformat.v4.new_code_cell(source, execution_count=i + 1)
        cell.outputs = [
            nbformat.v4.new_output("stream", name="stdout", text="x" * 200 + "\n"),
            nbformat.v4.new_output("execute_result", data={"text/plain": str(i * 2)}, execution_count=i + 1),
        ]
        filler.append(cell)
    measure = MEASURE % {"pings": pings, "reads": reads}
    nb.cells = [nbformat.v4.new_code_cell("%load_ext ipyagent"), nbformat.v4.new_code_cell(measure), *filler]
    nbformat.write(nb, str(path))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="10,200,1000", help="cells in the notebook")
    parser.add_argument("--pings", type=int, default=50)
    parser.add_argument("--reads", type=int, default=20)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    rows, runs = [], {}
    with tempfile.TemporaryDirectory(prefix="ipyagent-bench-") as tmp:
        process, url, token = start_lab(Path(tmp))
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
                for size in (int(s) for s in args.sizes.split(",")):
                    name = f"live-{size}.ipynb"
                    notebook(Path(tmp) / "root" / name, size, args.pings, args.reads)
                    page = browser.new_page(viewport={"width": 1280, "height": 1000})
                    open_notebook(page, url, token, name)
                    run_cell_and_wait(page, 0)
                    result = json.loads(run_cell_and_wait(page, 1))
                    runs[size] = result
                    ping, read = result["ping"], result["read"]
                    tool = result["read_cells"]
                    rows.append(
                        [size, percentile(ping, 50), percentile(ping, 95), percentile(read, 50),
                         percentile(read, 95), result["bytes"] / 1024, percentile(tool, 50),
                         percentile(tool, 95), result["page_bytes"] / 1024]
                    )  # fmt: skip
                    page.evaluate("() => window.jupyterapp.commands.execute('kernelmenu:shutdown')")
                    page.close()
                browser.close()
        finally:
            process.terminate()
            process.wait(timeout=30)
    report(
        "live_notebook",
        COLUMNS,
        rows,
        {"pings": args.pings, "reads": args.reads, "runs": runs},
    )


if __name__ == "__main__":
    main()
