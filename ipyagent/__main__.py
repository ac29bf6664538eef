"""``python -m ipyagent``: run a notebook that uses the agent, headless, and show what it did.

    python -m ipyagent run notebooks/01-quickstart.ipynb [--output executed.ipynb] [--timeout 900]
    python -m ipyagent run analysis.ipynb --record     # record its cassette, save it executed

Each cell runs in a fresh kernel of this Python (as "Run All" would); for every ``%%agent``
cell the prompt and what the agent answered are printed. Exits non-zero if a cell fails.
``--record`` records every model request to the notebook's cassette (``analysis.cassette.jsonl``)
and saves the notebook with its outputs, so that ``pytest --nbval --ipyagent-replay=replay``
checks it offline; see docs/regression-testing.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["main", "run_notebook"]


def _outputs_text(cell: Any) -> str:
    parts = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream":
            parts.append(output.get("text", ""))
        elif output.get("output_type") == "error":
            parts.append("\n".join(output.get("traceback", [])) or f"{output['ename']}: {output['evalue']}")
        elif "data" in output and "application/vnd.jupyter.widget-view+json" not in output["data"]:
            parts.append(str(output["data"].get("text/plain", "")))
    return "\n".join(p.rstrip("\n") for p in parts if p.strip())


def run_notebook(path: Path, *, output: Path | None = None, timeout: int = 900, record: bool = False) -> int:
    """Execute ``path``; print each %%agent cell's prompt and result. Returns a process exit code.

    With ``record``, the kernel records its model requests to the notebook's cassette, and the
    notebook is saved (to ``output``, else in place) only if every cell ran."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    from .kernel.notebook_path import HEADLESS_ENV

    nb = nbformat.read(str(path), as_version=4)
    cassette = _recorded_cassette(path) if record else None
    kept = cassette.read_bytes() if cassette is not None and cassette.exists() else None
    with tempfile.TemporaryDirectory() as tmp:
        # A kernelspec for this very interpreter: the notebook runs with what is installed here.
        spec = Path(tmp) / "kernels" / "ipyagent-run"
        spec.mkdir(parents=True)
        argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
        (spec / "kernel.json").write_text(
            json.dumps({"argv": argv, "display_name": "ipyagent", "language": "python"})
        )
        os.environ["JUPYTER_PATH"] = os.pathsep.join([tmp, os.environ.get("JUPYTER_PATH", "")]).rstrip(
            os.pathsep
        )
        # Always this notebook: run from another notebook's kernel, the variable names that one.
        os.environ["JPY_SESSION_NAME"] = str(path.resolve())
        # No front end: the agent's notebook tools must not edit the file this run executes.
        os.environ[HEADLESS_ENV] = "1"
        if record:
            os.environ["IPYAGENT_REPLAY"] = "record"
        client = NotebookClient(
            nb,
            timeout=timeout,
            kernel_name="ipyagent-run",
            resources={"metadata": {"path": str(path.parent)}},
            # A view's saved state carries its whole front-end bundle (~140 KB each); the run's
            # text is in the outputs anyway.
            store_widget_state=False,
        )
        # Widget state saved by an earlier run describes views whose outputs are replaced now.
        nb.metadata.pop("widgets", None)
        failed = False
        try:
            client.execute()
        except (CellExecutionError, CellTimeoutError, DeadKernelError) as exc:
            failed = True
            print(f"A cell failed:\n{exc}", file=sys.stderr)
    for cell in nb.cells:
        if cell.cell_type != "code" or not cell.source.lstrip().startswith("%%agent"):
            continue
        header, _, prompt = cell.source.partition("\n")
        print(f"\n━━ {header.strip()}\n{textwrap.indent(prompt.strip(), '  » ')}")
        print(textwrap.indent(_outputs_text(cell) or "(no output)", "  "))
    if cassette is not None and failed:  # the notebook and its cassette stay a matching pair
        if kept is None:
            cassette.unlink(missing_ok=True)
        else:
            cassette.write_bytes(kept)
        print(
            f"\nNot saved: a cell failed, so {path.name} and {cassette.name} stay as they were.",
            file=sys.stderr,
        )
    elif output is not None or record:
        target = output or path
        nbformat.write(nb, str(target))
        print(f"\nSaved the executed notebook to {target}")
    return 1 if failed else 0


def _recorded_cassette(notebook: Path) -> Path:
    from .kernel.replay import ReplaySwitch

    return ReplaySwitch.from_env(os.environ).cassette_path(notebook.resolve())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ipyagent", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="execute a notebook headless and print what each %%agent cell did")
    run.add_argument("notebook", type=Path)
    run.add_argument("--output", type=Path, default=None, help="save the executed notebook here")
    run.add_argument("--timeout", type=int, default=900, help="seconds allowed per cell")
    run.add_argument(
        "--record",
        action="store_true",
        help="record the model to the notebook's cassette and save the notebook executed (in place "
        "unless --output is given)",
    )
    args = parser.parse_args(argv)
    if not args.notebook.exists():
        parser.error(f"no notebook at {args.notebook}")
    return run_notebook(args.notebook, output=args.output, timeout=args.timeout, record=args.record)


if __name__ == "__main__":
    sys.exit(main())
