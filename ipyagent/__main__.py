"""``python -m ipyagent run``: run notebooks that use the agent, headless, and show what they did.

    python -m ipyagent run notebooks/01-quickstart.ipynb [--output executed.ipynb] [--timeout 900]
    python -m ipyagent run notebooks/ --jobs 2          # every notebook in a folder, two at a time
    python -m ipyagent run analysis.ipynb --record      # record its cassette, save it executed
    python -m ipyagent run notebooks/ --replay          # answer from the cassettes, offline

Each notebook runs in a fresh kernel of this Python (as "Run All" would). For every ``%%agent``
cell the prompt and what the agent answered are printed; a cell that failed is shown with its
error, and the cells after it say they did not run. A last line sums up each notebook. Exits
non-zero if any notebook failed. ``--record`` records every model request to the notebook's
cassette (``analysis.cassette.jsonl``) and saves the notebook with its outputs, so that
``pytest --nbval`` checks it offline; see docs/regression-testing.md.

    python -m ipyagent mcp list FOLDER                 # the MCP servers a notebook folder names
    python -m ipyagent mcp allow FOLDER/.mcp.json NAME # approve one (e.g. before a CI run)

A server of a folder's ``.mcp.json`` starts only once a person approved that exact entry (see
docs/mcp.md); ``mcp allow`` shows the entry and remembers its digest beside your config file.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from .headless import CellReport, NotebookReport, Replay, find_notebooks, run_notebook, run_notebooks

__all__ = ["main"]

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


class Printer:
    """Writes the reports, in colour only to a terminal (and never with ``NO_COLOR`` set)."""

    def __init__(self, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> None:
        self.out, self.err = out, err
        self.colour = out.isatty() and not os.environ.get("NO_COLOR")

    def text(self, value: str) -> str:
        return value if self.colour else _ANSI.sub("", value)

    def cell(self, cell: CellReport, *, prefix: str = "") -> None:
        if cell.status == "failed":
            self.out.write(
                f"\n━━ {prefix}cell {cell.index + 1} failed:\n{textwrap.indent(cell.source, '  │ ')}\n"
            )
            self.out.write(textwrap.indent(self.text(cell.error or "(no error text)"), "  ") + "\n")
        elif cell.agent:
            header, _, prompt = cell.source.strip().partition("\n")
            self.out.write(f"\n━━ {prefix}{header.strip()}\n{textwrap.indent(prompt.strip(), '  » ')}\n")
            shown = self.text(_outputs_text(cell.outputs)) if cell.status == "ran" else ""
            what = shown or (
                "(not run: an earlier cell failed)" if cell.status == "not run" else "(no output)"
            )
            self.out.write(textwrap.indent(what, "  ") + "\n")
        self.out.flush()

    def unrun(self, report: NotebookReport, *, prefix: str = "") -> None:
        """The agent cells that never ran, after the failure that stopped them."""
        for cell in report.cells:
            if cell.status == "not run" and cell.agent:
                self.cell(cell, prefix=prefix)

    def summary(self, report: NotebookReport) -> None:
        if report.setup_error is not None:
            self.err.write(f"✗ {report.path}: {self.text(report.setup_error)}\n")
            return
        ran = sum(c.status != "not run" for c in report.cells)
        agents = sum(c.agent for c in report.cells)
        failing = report.failed_cell
        mark = "✓" if report.ok else "✗"
        failed = f" (cell {failing.index + 1} failed)" if failing is not None else ""
        cells = f"{ran} of {len(report.cells)} cells run{failed}, {agents} agent cell{'s' * (agents != 1)}"
        if report.not_saved:
            self.err.write(report.not_saved + "\n")
        if report.saved_to is not None:
            self.out.write(f"Saved the executed notebook to {report.saved_to}\n")
        self.out.write(f"{mark} {report.path}: {cells}, {_models(report)}, {_seconds(report.seconds)}\n")
        self.out.flush()


def _models(report: NotebookReport) -> str:
    if not report.models:
        return "no model used"
    models = ", ".join(report.models)
    how = {"replay": " (replayed from the cassette)", "record": " (recorded to the cassette)"}
    return f"model {models}{how.get(report.replay, '')}"


def _seconds(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds < 120 else f"{int(seconds // 60)} min {int(seconds % 60)} s"


def _outputs_text(outputs: list[dict[str, Any]]) -> str:
    parts = []
    for output in outputs:
        if output.get("output_type") == "stream":
            parts.append(output.get("text", ""))
        elif output.get("output_type") == "error":
            parts.append("\n".join(output.get("traceback", [])) or f"{output['ename']}: {output['evalue']}")
        elif "data" in output and "application/vnd.jupyter.widget-view+json" not in output["data"]:
            parts.append(str(output["data"].get("text/plain", "")))
    return "\n".join(p.rstrip("\n") for p in parts if p.strip())


def run(paths: list[Path], *, jobs: int, timeout: int, cassette: Replay, output: Path | None) -> int:
    """Run the notebooks and print their reports. Returns the process's exit code."""
    printer = Printer()
    started = time.monotonic()
    several = len(paths) > 1

    def on_done(report: NotebookReport) -> None:
        # One notebook says each cell's outcome as it ends (on_cell); several are printed whole,
        # so that parallel runs do not interleave.
        if several:
            for cell in report.cells:
                printer.cell(cell, prefix=f"{report.path.name}: ")
        else:
            printer.unrun(report)
        printer.summary(report)

    async def one(path: Path) -> NotebookReport:
        return await run_notebook(
            path, timeout=timeout, cassette=cassette, output=output, on_cell=None if several else printer.cell
        )

    reports = asyncio.run(run_notebooks(paths, jobs=jobs, run=one, on_done=on_done))
    failed = [r for r in reports if not r.ok]
    if several:
        passed = len(reports) - len(failed)
        took = _seconds(time.monotonic() - started)
        print(f"\n{len(reports)} notebooks: {passed} passed, {len(failed)} failed, {took} (--jobs {jobs})")
        for report in failed:
            print(f"  failed: {report.path}")
    return 1 if failed else 0


def mcp(action: str, path: Path, name: str | None) -> int:
    """``mcp list PATH`` / ``mcp allow PATH NAME``: a notebook folder's MCP servers, and approving
    one of them (the folder, or its ``.mcp.json``)."""
    from .agentlib.errors import UserError
    from .agentlib.mcp_servers import McpServers
    from .agentlib.mcp_servers.approvals import describe

    folder = path.parent if path.name == ".mcp.json" else path
    if not (folder / ".mcp.json").is_file():
        print(f"There is no .mcp.json in {folder}.", file=sys.stderr)
        return 2
    servers = McpServers(workspace=folder)
    try:
        found = {k: v for k, v in servers.servers().items() if v.from_folder}
        if action == "list":
            rows = [row for row in servers.status() if row.name in found]
            print("\n".join(str(row) for row in rows) or f"{folder / '.mcp.json'} names no MCP servers.")
            return 0
        config = found.get(name or "")
        if config is None or config.problem:
            why = config.problem if config is not None else f"it names {', '.join(sorted(found)) or 'none'}"
            print(f"{folder / '.mcp.json'} has no usable MCP server {name!r}: {why}", file=sys.stderr)
            return 2
        servers.allow(config.name)
        print(f"Approved the MCP server {config.name!r}:\n{describe(config)}")
        print("It starts in runs of that folder's notebooks (headless, -y included) until the entry changes.")
        return 0
    except UserError as exc:
        print(f"{exc.info.message}\n{exc.info.hint}", file=sys.stderr)
        return 1
    finally:
        servers.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ipyagent", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    cmd = commands.add_parser(
        "run",
        help="execute notebooks headless and print what each %%agent cell did",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cmd.add_argument(
        "notebooks", type=Path, nargs="+", metavar="NOTEBOOK", help="a notebook, or a folder of them"
    )
    cmd.add_argument(
        "--output", type=Path, default=None, help="save the executed notebook here (one notebook)"
    )
    cmd.add_argument("--timeout", type=int, default=900, help="seconds allowed per cell (default 900)")
    cmd.add_argument(
        "-j", "--jobs", type=int, default=1, help="notebooks run at once, each in its own kernel"
    )
    cassettes = cmd.add_mutually_exclusive_group()
    cassettes.add_argument(
        "--record",
        dest="cassette",
        action="store_const",
        const="record",
        help="record the model to each notebook's cassette and save the notebook executed (in place "
        "unless --output is given)",
    )
    cassettes.add_argument(
        "--replay",
        dest="cassette",
        action="store_const",
        const="replay",
        help="answer from each notebook's cassette: offline, no key, no local model",
    )
    servers = commands.add_parser(
        "mcp",
        help="list or approve the MCP servers of a notebook folder's .mcp.json",
        description="A server of a notebook folder's .mcp.json starts only once a person approved that "
        "exact entry; `allow` shows the entry and remembers its digest beside your config file.",
    )
    actions = servers.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list", help="each server of the folder's file, and whether it is approved")
    listing.add_argument("path", type=Path, metavar="PATH", help="a notebook folder or its .mcp.json")
    allowing = actions.add_parser("allow", help="approve one server of the folder's file, as it is now")
    allowing.add_argument("path", type=Path, metavar="PATH", help="a notebook folder or its .mcp.json")
    allowing.add_argument("name", metavar="NAME", help="the server's name in the file")
    args = parser.parse_args(argv)
    if args.command == "mcp":
        return mcp(args.action, args.path, getattr(args, "name", None))
    missing = [str(p) for p in args.notebooks if not p.exists()]
    if missing:
        parser.error(f"no notebook at {', '.join(missing)}")
    paths = find_notebooks(args.notebooks)
    if not paths:
        parser.error(f"no notebooks in {', '.join(map(str, args.notebooks))}")
    if args.output is not None and len(paths) > 1:
        parser.error("--output names one file; it works with one notebook")
    if args.jobs < 1:
        parser.error("--jobs must be 1 or more")
    return run(paths, jobs=args.jobs, timeout=args.timeout, cassette=args.cassette, output=args.output)


if __name__ == "__main__":
    sys.exit(main())
