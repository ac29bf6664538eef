"""A ``%%agent`` cell's time when no front end shows it: a real kernel run by nbclient, a
scripted model (no network), one short answer per cell.

    python bench/headless_cell.py [--cells 10]

Four ways of running the same cells:
- ``nbclient``: plain nbclient (nbconvert --execute and papermill run notebooks this way);
- ``nbclient + $IPYAGENT_HEADLESS``: as ``python -m ipyagent run`` and pytest --nbval do;
- ``nbclient, --quiet``: no view at all, the floor;
- ``client that takes input``: requests that allow stdin, as a console or a notebook front end
  sends them; nothing tells the kernel whether the view is shown, so the run waits for it.

Each cell is timed from nbclient sending it to its reply (a warm-up cell first, not counted).
Target: a headless cell with the live view within ~50 ms of ``--quiet``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _report import report

MODES = {
    "nbclient": {"headless": False, "quiet": False, "stdin": False},
    "nbclient + $IPYAGENT_HEADLESS": {"headless": True, "quiet": False, "stdin": False},
    "nbclient, --quiet": {"headless": False, "quiet": True, "stdin": False},
    "client that takes input": {"headless": False, "quiet": False, "stdin": True},
}


def run_mode(cells: int, *, headless: bool, quiet: bool, stdin: bool) -> list[float]:
    import nbformat
    from nbclient import NotebookClient

    flags = " --quiet" if quiet else ""
    setup = (
        "%load_ext ipyagent\nfrom ipyagent.testing import ScriptedModel\n"
        f"m = ScriptedModel(['hi'] * {cells + 1})"
    )
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(setup)] + [
        nbformat.v4.new_code_cell(f"%%agent -m m{flags}\nSAY hi") for _ in range(cells + 1)
    ]
    started: dict[int, float] = {}
    took: dict[int, float] = {}

    def on_execute(cell: Any, cell_index: int, **_: Any) -> None:
        if stdin:  # nbclient switches input off on its client; a console leaves it on
            client.kc.allow_stdin = True
        started[cell_index] = time.perf_counter()

    def on_executed(cell: Any, cell_index: int, **_: Any) -> None:
        took[cell_index] = time.perf_counter() - started[cell_index]

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        spec = work / "jupyter" / "kernels" / "bench"
        spec.mkdir(parents=True)
        argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
        (spec / "kernel.json").write_text(
            json.dumps({"argv": argv, "display_name": "bench", "language": "python"})
        )
        saved = dict(os.environ)
        os.environ.update(
            JUPYTER_PATH=str(work / "jupyter"),
            JUPYTER_RUNTIME_DIR=str(work / "runtime"),
            IPYTHONDIR=str(work / "ipython"),
        )
        for key in ("IPYAGENT_HEADLESS", "JPY_SESSION_NAME", "IPYAGENT_REPLAY", "IPYAGENT_MODEL"):
            os.environ.pop(key, None)
        if headless:
            os.environ["IPYAGENT_HEADLESS"] = "1"
        try:
            client = NotebookClient(
                nb,
                timeout=120,
                kernel_name="bench",
                resources={"metadata": {"path": str(work)}},
                on_cell_execute=on_execute,
                on_cell_executed=on_executed,
            )
            client.execute()
        finally:
            os.environ.clear()
            os.environ.update(saved)
    for cell in nb.cells[1:]:
        text = json.dumps(cell.outputs)
        if not quiet and "hi" not in text:
            raise SystemExit(f"A cell did not show its answer: {text[:300]}")
    return [took[i] for i in range(2, cells + 2)]  # cell 1 is the warm-up


def main(cells: int) -> None:
    rows = []
    samples: dict[str, list[float]] = {}
    for name, mode in MODES.items():
        times = run_mode(cells, **mode)
        samples[name] = [round(t * 1e3, 1) for t in times]
        rows.append([name, statistics.median(times) * 1e3, min(times) * 1e3, max(times) * 1e3])
    report(
        "headless_cell",
        ["run", "median ms", "min ms", "max ms"],
        rows,
        {"cells": cells, "samples_ms": samples},
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cells", type=int, default=10)
    main(parser.parse_args().cells)
