"""The ``shell`` tool: a command line, run in the notebook's folder inside the OS sandbox.

Offered only when asked for (``--tools shell``, or ``c.AgentMagics.tools``): a shell reaches
further than the file tools, so it is never in the default set. It changes things, so it asks
for permission like any tool that does. The command runs confined (:mod:`ipyagent.agentlib.sandbox`):
it writes only in the workspace, reads no personal files, has no network and is killed at its
time limit. Where this machine cannot confine it, it is refused — never run unconfined. The
workspace's control files (``.mcp.json``, ``AGENTS.md``, ``.ipyagent/``, skill folders) are
read-only to it: a command cannot be asked about before it runs, so only the file tools, which
the loop asks about, change one.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from ...agentlib import sandbox
from ...agentlib.tools import Tool, ToolOutput, tool

__all__ = ["MAX_TIMEOUT", "shell_tools"]

#: What a command meets when it tries to change a control file (mounted read-only over itself).
_READ_ONLY, _BUSY = os.strerror(errno.EROFS), os.strerror(errno.EBUSY)
CONTROL_NOTE = (
    "[note] In the sandbox the workspace's control files are read-only: .mcp.json, AGENTS.md, "
    ".ipyagent/, and the skill folders (skills/, .agents/, .claude/). They decide what the agent is "
    "told and which programs it starts, so only a person may change them: use write_file or "
    "edit_file for such a change (the user is asked), or tell the user what should change."
)
#: Characters of stdout and of stderr the model reads.
OUTPUT_CAP = 12_000
MAX_TIMEOUT = 600.0


def shell_tools(workspace: Path) -> list[Tool]:
    """The ``shell`` tool for ``workspace`` (its commands run there)."""

    async def shell(command: str, timeout: float = 60.0) -> ToolOutput:
        """Run a shell command (sh -c) in the notebook's folder, in a sandbox: it may write only
        in this folder, cannot read the user's home, has no network, and is killed at the timeout.

        Args:
            command: The command line, e.g. "ls -la" or "python script.py > out.txt".
            timeout: Seconds before the command is killed (at most 600).
        """
        limits = sandbox.Limits(timeout=min(max(timeout, 1.0), MAX_TIMEOUT), output=OUTPUT_CAP * 4)
        result = await sandbox.run(command, cwd=workspace, limits=limits)
        text = describe(result, limits)
        if _READ_ONLY in result.stderr or _BUSY in result.stderr:
            text += "\n" + CONTROL_NOTE
        return ToolOutput(text=text, is_error=not result.ok)

    # The sandbox's limit kills the command; the agent's own timeout is a little later.
    return [tool(shell, timeout=MAX_TIMEOUT + 10)]


def describe(result: sandbox.SandboxResult, limits: sandbox.Limits) -> str:
    """What the model reads: how the command ended, then its output."""
    if result.reason == "timeout":
        head = f"[killed: ran past the time limit of {limits.timeout:g} s]"
    elif result.reason == "signal":
        why = {
            "SIGXCPU": " (CPU time limit)",
            "SIGXFSZ": " (file size limit: of one file, or of all written by the call)",
        }.get(result.signal or "", "")
        head = f"[killed by {result.signal}{why}]"
    else:
        head = f"[exit code {result.exit_code}]"
    sections = [head]
    for name, text in (("stdout", result.stdout), ("stderr", result.stderr)):
        if text:
            sections.append(f"[{name}]\n{_cap(text.rstrip())}")
    if result.truncated:
        sections.append(f"… (output cut at {limits.output:,} bytes per stream)")
    return "\n".join(sections)


def _cap(text: str) -> str:
    if len(text) <= OUTPUT_CAP:
        return text
    return f"{text[:OUTPUT_CAP]}\n… (output truncated: {OUTPUT_CAP:,} of {len(text):,} characters shown)"
