"""The round trip of an edit of the open notebook in a real JupyterLab: kernel -> page -> kernel.

    python bench/notebook_edits.py [--sizes 10,200] [--edits 50]

Starts JupyterLab (bench/_lab.py), opens in headless Chromium a notebook of N code cells, loads
ipyagent, then a cell measures, while it runs (so every answer reaches a kernel whose main shell
is busy, through the comm's subshell on ipykernel 7):

- edit ms: ``LiveNotebook.edit`` of one ``replace`` op, guarded by the source the cell has, sent
  to the page, applied in one transaction (the cell re-renders), answered and validated
  (p50 / p95 over --edits edits, all of one run, on a cell in the middle of the notebook);
- undo_edit ms: ``undo_edit`` of one of those edits, in reverse order (p50 / p95 over --edits);
- undo_run ms: the same --edits edits made again as one run, then ``undo_run`` of that run:
  one measure of putting back a whole run;
- run_cell ms: ``run_cell``'s path (the cell's code on the main thread, its outputs streamed to
  the page as ``cell_outputs`` notices, its count and history), against the same code run by
  IPython's own ``run_cell`` in the kernel (outputs captured, not sent): p50 over --edits runs.

Prints a table, writes bench/results/notebook_edits.json. Needs Debian's chromium and Playwright.
The machine's load shows in the numbers: compare runs on the same machine only.
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
target = %(target)r
def edits(run):
    ids, out = [], []
    for i in range(%(edits)d):
        ops = [{"op": "replace", "cell_id": target, "expect": f"x = {i}", "source": f"x = {i + 1}"}]
        ids.append(f"{run}-{i}")
        start = time.perf_counter()
        answer = live.edit(ops, provenance={"session": None, "run": run, "call": f"c{i}"}, edit_id=ids[-1])
        out.append((time.perf_counter() - start) * 1000)
        assert answer.applied, answer
    return out, ids
edit_ms, edit_ids = edits("bench-edits")
undo_ms = []
for edit_id in reversed(edit_ids):
    start = time.perf_counter()
    answer = live.undo_edit(edit_id)
    undo_ms.append((time.perf_counter() - start) * 1000)
    assert answer.undone and not answer.kept, answer
edits("bench-run")
start = time.perf_counter()
answer = live.undo_run("bench-run")
run_ms = (time.perf_counter() - start) * 1000
assert len(answer.undone) == 1 and not answer.kept, answer
from IPython.utils.capture import capture_output
state = kernel_state(get_ipython())
code = "y = sum(range(1000))\\nprint(y)"
cell_ms, direct_ms = [], []
for i in range(%(edits)d):
    start = time.perf_counter()
    future = state.loop.submit(state.cells.run(%(runs)r, code, send=live.notify_cell_outputs, timeout=60))
    assert "[stdout]\\n499500" in state.main.serve_until(future).text
    cell_ms.append((time.perf_counter() - start) * 1000)
    start = time.perf_counter()
    with capture_output():
        get_ipython().run_cell(code, store_history=False)
    direct_ms.append((time.perf_counter() - start) * 1000)
times = {"edit": edit_ms, "undo_edit": undo_ms, "undo_run": run_ms, "run_cell": cell_ms}
print(json.dumps({**times, "direct": direct_ms}))
"""

COLUMNS = [
    "cells", "edit p50 ms", "edit p95 ms", "undo_edit p50 ms", "undo_edit p95 ms", "undo_run ms",
    "run_cell p50 ms", "same code direct p50 ms",
]  # fmt: skip


def notebook(path: Path, cells: int, edits: int) -> str:
    """The notebook: %load_ext, the measuring cell, then ``cells`` code cells; the target's id."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    filler = [nbformat.v4.new_code_cell(f"value_{i} = {i} * 2", id=f"cell-{i}") for i in range(cells)]
    target = filler[cells // 2]
    target.source = "x = 0"
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext ipyagent"),
        nbformat.v4.new_code_cell(MEASURE % {"target": target.id, "edits": edits, "runs": filler[0].id}),
        *filler,
    ]
    nbformat.write(nb, str(path))
    return str(target.id)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="10,200", help="cells in the notebook")
    parser.add_argument("--edits", type=int, default=50)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    rows, runs = [], {}
    with tempfile.TemporaryDirectory(prefix="ipyagent-bench-") as tmp:
        process, url, token = start_lab(Path(tmp))
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
                for size in (int(s) for s in args.sizes.split(",")):
                    name = f"edits-{size}.ipynb"
                    notebook(Path(tmp) / "root" / name, size, args.edits)
                    page = browser.new_page(viewport={"width": 1280, "height": 1000})
                    open_notebook(page, url, token, name)
                    run_cell_and_wait(page, 0)
                    printed = run_cell_and_wait(page, 1)
                    try:
                        result = json.loads(printed)
                        result["edit"]
                    except (json.JSONDecodeError, KeyError, TypeError):
                        raise SystemExit(f"the measuring cell failed:\n{printed}") from None
                    runs[size] = result
                    edit, undo = result["edit"], result["undo_edit"]
                    rows.append(
                        [size, percentile(edit, 50), percentile(edit, 95), percentile(undo, 50),
                         percentile(undo, 95), result["undo_run"], percentile(result["run_cell"], 50),
                         percentile(result["direct"], 50)]
                    )  # fmt: skip
                    page.evaluate("() => window.jupyterapp.commands.execute('kernelmenu:shutdown')")
                    page.close()
                browser.close()
        finally:
            process.terminate()
            process.wait(timeout=30)
    report("notebook_edits", COLUMNS, rows, {"edits": args.edits, "runs": runs})


if __name__ == "__main__":
    main()
