"""The tool bench/mcp.py compares, served over stdio by the MCP SDK (``python _mcp_server.py``)."""

from __future__ import annotations

import sys
from pathlib import Path

# bench/mcp.py would shadow the SDK: this script's folder comes first on sys.path.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from mcp.server.mcpserver import MCPServer  # noqa: E402
from mcp_types import ToolAnnotations  # noqa: E402

server = MCPServer("bench")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


if __name__ == "__main__":
    server.run()
