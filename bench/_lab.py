"""Shared by the benchmarks that run in a real JupyterLab: start it (this Python as the kernel,
ipyagent's extension from this checkout's ipyagent/labextension, every Jupyter folder in a
scratch folder), open a notebook in a Playwright page, run a cell and read what it printed."""

from __future__ import annotations

import json
import os
import secrets
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


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


def open_notebook(page: Any, url: str, token: str, name: str) -> None:
    """Open ``name`` (in the root folder) in a workspace of its own and wait for its kernel."""
    workspace = name.replace(".", "-")
    page.goto(f"{url}/lab/workspaces/{workspace}/tree/{name}?token={token}")
    page.wait_for_function(
        """() => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
            const k = w && w.sessionContext && w.sessionContext.session
                && w.sessionContext.session.kernel;
            return k && k.status === 'idle'; }""",
        timeout=120_000,
    )


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
