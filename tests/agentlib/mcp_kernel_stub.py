"""Plays a kernel for the MCP shutdown tests and bench: a Python process that starts MCP servers
with :class:`McpServers`, then ends the way it is told.

    python mcp_kernel_stub.py SERVERS_JSON

It prints one JSON line, the pids of every process below it (the servers, what they started),
then reads one line from stdin: ``close`` closes the servers and exits, ``exit`` exits (the
``atexit`` hook closes them); anything else, or a signal, ends it as it comes.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from ipyagent.agentlib.mcp_servers import McpServers
from ipyagent.agentlib.tool_sources import SourceContext


async def nobody(question: str, choices: list[str]) -> str | None:
    return None


def descendants(root: int) -> list[int]:
    """Every process below ``root``, from /proc (Linux)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def main() -> None:
    servers = McpServers(json.loads(sys.argv[1]), read_config=False)
    sourced = asyncio.run(servers.tools_for_run(SourceContext(ask=nobody)))
    assert not sourced.notes, sourced.notes
    print(json.dumps(descendants(os.getpid())), flush=True)
    if sys.stdin.readline().strip() == "close":
        servers.close()


if __name__ == "__main__":
    main()
