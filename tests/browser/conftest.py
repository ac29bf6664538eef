"""A real JupyterLab on 127.0.0.1 and a headless Chromium driven by Playwright.

Facts these fixtures rely on are in shared/reference/jupyter-testing.md: Debian's chromium at
/usr/bin/chromium (never `playwright install`), the flags that work as root on a closed network,
`expose_app_in_browser` for driving Lab, and that Lab needs a moment to exit before a port is
reused. Tests here are skipped, with the reason, when chromium or JupyterLab is missing.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = Path(__file__).parent / "screenshots"
#: ipyagent's JupyterLab extension as this checkout builds it (scripts/build-labext.sh): the lab
#: loads it as `pip install ipyagent` would install it, and before any copy in the environment.
LABEXTENSION = Path(__file__).resolve().parents[2] / "ipyagent" / "labextension"

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Lab:
    url: str
    token: str
    root: Path
    process: subprocess.Popen[bytes]

    def api(self, path: str) -> Any:
        request = urllib.request.Request(
            f"{self.url}{path}", headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())


def start_server(base: Path, module: str, app: str) -> tuple[Lab, Any]:
    """Start ``python -m module`` (JupyterLab, or Notebook 7 whose server app is ``app``) on
    127.0.0.1 with every Jupyter folder under ``base``, this Python as the notebooks' kernel and
    this checkout's extension; the server and its open log file, once it answers."""
    root = base / "root"
    root.mkdir()
    env = dict(os.environ)
    for name in ("config", "data", "runtime", "ipython"):
        (base / name).mkdir()
    env.update(
        JUPYTER_CONFIG_DIR=str(base / "config"),
        JUPYTER_DATA_DIR=str(base / "data"),
        JUPYTER_RUNTIME_DIR=str(base / "runtime"),
        IPYTHONDIR=str(base / "ipython"),
        JUPYTER_PLATFORM_DIRS="1",
    )
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "IPYAGENT_MODEL"):
        env.pop(key, None)
    # The notebooks' kernel is this very Python, where ipyagent is installed.
    spec = base / "data" / "kernels" / "python3"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": "Python 3", "language": "python"})
    )
    extensions = base / "labextensions"
    extensions.mkdir()
    (extensions / "ipyagent").symlink_to(LABEXTENSION, target_is_directory=True)
    # Also in the user's data folder, which comes before the environment's share/jupyter: Notebook
    # 7 lists the extra path's build but serves its files from the first labextensions folder
    # that has the extension, which would otherwise be the copy `pip install` made.
    (base / "data" / "labextensions").mkdir()
    (base / "data" / "labextensions" / "ipyagent").symlink_to(LABEXTENSION, target_is_directory=True)
    port, token = free_port(), secrets.token_hex(16)
    log = open(base / "server.log", "wb")  # noqa: SIM115 - closed after the server stops
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            module,
            "--no-browser",
            "--allow-root",
            "--ip=127.0.0.1",
            f"--port={port}",
            f"--ServerApp.token={token}",
            f"--ServerApp.root_dir={root}",
            f"--{app}.expose_app_in_browser=True",
            f"--{app}.extra_labextensions_path={extensions}",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    server = Lab(f"http://127.0.0.1:{port}", token, root, process)
    deadline = time.monotonic() + 60
    while True:
        try:
            server.api("/api/status")
            return server, log
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{module} did not start; see {base / 'server.log'}") from None
            time.sleep(0.25)


def stop_server(server: Lab, log: Any) -> None:
    server.process.terminate()
    try:
        server.process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()
    log.close()


@pytest.fixture(scope="session")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    pytest.importorskip("jupyterlab")
    server, log = start_server(tmp_path_factory.mktemp("lab"), "jupyterlab", "LabApp")
    yield server
    stop_server(server, log)


@pytest.fixture(scope="session")
def notebook7(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """Notebook 7 (the `notebook` package), set up as the lab is."""
    pytest.importorskip("notebook", reason="Notebook 7 (the notebook package) is not installed")
    server, log = start_server(tmp_path_factory.mktemp("nb7"), "notebook", "JupyterNotebookApp")
    yield server
    stop_server(server, log)


@pytest.fixture
def browser() -> Iterator[Any]:
    # Per test, not per session: Playwright's sync API runs an event loop in the main thread while
    # it is started, and the async tests that run after these would find it "already running".
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as p:
        instance = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield instance
        instance.close()


@pytest.fixture
def page(browser: Any, tmp_path: Path) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    page = context.new_page()
    yield page
    context.close()


def write_notebook(lab: Lab, name: str, cells: list[str]) -> str:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    nbformat.write(nb, str(lab.root / name))
    return name


def open_notebook(page: Any, lab: Lab, name: str) -> None:
    # A workspace of its own: Lab would otherwise reopen other tests' notebooks beside this one.
    workspace = name.replace(".", "-")
    page.goto(f"{lab.url}/lab/workspaces/{workspace}/tree/{name}?token={lab.token}")
    page.wait_for_function(
        """() => {
            const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
            const session = w && w.sessionContext && w.sessionContext.session;
            const kernel = session && session.kernel;
            return kernel && kernel.status === 'idle';
        }""",
        timeout=60_000,
    )


def run_cell(page: Any, index: int) -> None:
    """Run cell ``index`` as the user would (it becomes the active cell); not awaited."""
    page.evaluate(
        f"""() => {{
            window.jupyterapp.shell.currentWidget.content.activeCellIndex = {index};
            window.jupyterapp.commands.execute('notebook:run-cell');
        }}"""
    )


def run_all(page: Any) -> None:
    # Not awaited: the command's promise resolves only when every cell has finished.
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")


def cell_running(page: Any, index: int) -> bool:
    """Whether cell ``index`` is executing. (The kernel's status is no guide: with comm subshells
    it reads "idle" while the main shell still runs a cell.)"""
    state: str = page.evaluate(
        f"() => window.jupyterapp.shell.currentWidget.content.widgets[{index}].model.executionState"
    )
    return state == "running"


def wait_cell_done(page: Any, index: int, timeout: float = 120_000) -> None:
    page.wait_for_function(
        f"""() => {{
            const model = window.jupyterapp.shell.currentWidget.content.widgets[{index}].model;
            return model.executionState === 'idle' && model.executionCount !== null;
        }}""",
        timeout=timeout,
    )


def screenshot(page: Any, test: str, step: str) -> Path:
    folder = SCREENSHOTS / test
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{step}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


# -- the live notebook: cells by id ---------------------------------------------------------


def write_cells(lab: Lab, name: str, cells: list[tuple[str, str]]) -> str:
    """A notebook of code cells with the ids given: the agent's script names them."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(source, id=cell_id) for cell_id, source in cells]
    nbformat.write(nb, str(lab.root / name))
    return name


def document(page: Any) -> list[dict[str, Any]]:
    """The open document's cells: id, source and ipyagent's metadata."""
    cells: list[dict[str, Any]] = page.evaluate(
        """() => window.jupyterapp.shell.currentWidget.content.model.sharedModel.cells.map(c => ({
            id: c.id, source: c.getSource(), ipyagent: c.getMetadata('ipyagent') ?? null,
        }))"""
    )
    return cells


def sources(page: Any) -> list[tuple[str, str]]:
    return [(c["id"], c["source"]) for c in document(page)]


def index_of(page: Any, cell_id: str) -> int:
    return [c["id"] for c in document(page)].index(cell_id)


def run_by_id(page: Any, cell_id: str) -> None:
    """Run the cell and wait for it by id: the agent's edits move it."""
    run_cell(page, index_of(page, cell_id))
    wait_done(page, cell_id)


def wait_done(page: Any, cell_id: str) -> None:
    page.wait_for_function(
        f"""() => {{
            const view = window.jupyterapp.shell.currentWidget.content;
            const widget = view.widgets.find(w => w.model.id === {json.dumps(cell_id)});
            return widget.model.executionState === 'idle' && widget.model.executionCount !== null;
        }}""",
        timeout=90_000,
    )


def output_of(page: Any, cell_id: str) -> str:
    text: str = page.evaluate(
        f"""() => {{
            const view = window.jupyterapp.shell.currentWidget.content;
            const widget = view.widgets.find(w => w.model.id === {json.dumps(cell_id)});
            return widget.model.outputs.toJSON()
                .map(o => o.text ? [].concat(o.text).join('') : JSON.stringify(o)).join('');
        }}"""
    )
    return text


def undo_in_lab(page: Any) -> None:
    """What Z in command mode (Edit > Undo) runs on the notebook."""
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:undo-cell-action')")


def type_into(page: Any, cell_id: str, text: str) -> None:
    """The user clicks into the cell, goes to the end of its text and types (and does not save)."""
    editor = page.locator(".jp-Notebook .jp-Cell").nth(index_of(page, cell_id)).locator(".cm-content")
    editor.click()
    page.keyboard.press("Control+End")
    page.keyboard.type(text)
