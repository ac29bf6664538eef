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
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from _chromium import CHROMIUM, FLAGS
from _report import report

ROOT = Path(__file__).resolve().parent.parent

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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def start_lab(base: Path) -> tuple[subprocess.Popen[bytes], str, str]:
    env = dict(os.environ)
    for name in ("config", "data", "runtime", "ipython", "root", "labextensions"):
        (base / name).mkdir()
    env.update(
        JUPYTER_CONFIG_DIR=str(base / "config"),
        JUPYTER_DATA_DIR=str(base / "data"),
        JUPYTER_RUNTIME_DIR=str(base / "runtime"),
        IPYTHONDIR=str(base / "ipython"),
        JUPYTER_PLATFORM_DIRS="1",
        PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]),
    )
    spec = base / "data" / "kernels" / "python3"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    kernelspec = {"argv": argv, "display_name": "Python 3", "language": "python"}
    (spec / "kernel.json").write_text(json.dumps(kernelspec))
    (base / "labextensions" / "ipyagent").symlink_to(ROOT / "ipyagent" / "labextension")
    port, token = free_port(), secrets.token_hex(16)
    process = subprocess.Popen(
        [
            sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", "--ip=127.0.0.1",
            f"--port={port}", f"--ServerApp.token={token}", f"--ServerApp.root_dir={base / 'root'}",
            "--LabApp.expose_app_in_browser=True",
            f"--LabApp.extra_labextensions_path={base / 'labextensions'}",
        ],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            request = urllib.request.Request(f"{url}/api/status", headers={"Authorization": f"token {token}"})
            urllib.request.urlopen(request, timeout=5).close()
            return process, url, token
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("JupyterLab did not start") from None
            time.sleep(0.25)


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


def run_cell_and_wait(page: Any, index: int, timeout: float = 300_000) -> str:
    page.evaluate(
        f"""() => {{ const nb = window.jupyterapp.shell.currentWidget.content;
            nb.activeCellIndex = {index}; window.jupyterapp.commands.execute('notebook:run-cell'); }}"""
    )
    page.wait_for_function(
        f"""() => {{ const m = window.jupyterapp.shell.currentWidget.content.widgets[{index}].model;
            return m.executionState === 'idle' && m.executionCount !== null; }}""",
        timeout=timeout,
    )
    text: str = page.evaluate(
        f"""() => window.jupyterapp.shell.currentWidget.content.widgets[{index}].model.outputs.toJSON()
            .map(o => o.text ? [].concat(o.text).join('') : JSON.stringify(o)).join('')"""
    )
    return text


def percentile(values: list[float], q: float) -> float:
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


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
                    page.goto(f"{url}/lab/workspaces/bench-{size}/tree/{name}?token={token}")
                    page.wait_for_function(
                        """() => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
                            const k = w && w.sessionContext && w.sessionContext.session
                                && w.sessionContext.session.kernel;
                            return k && k.status === 'idle'; }""",
                        timeout=120_000,
                    )
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
