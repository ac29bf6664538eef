"""MCP servers as tool sources: a client for the Model Context Protocol on the official ``mcp``
SDK (``pip install 'ipyagent[mcp]'``; nothing here imports it until a server starts).

- :mod:`.config`: what a server entry says (the ``mcpServers`` shape) and where entries come from;
- :mod:`.approvals`: which entries of notebook folders' ``.mcp.json`` a person approved (by digest);
- :mod:`.connection`: one server's connection, owned by one task;
- :mod:`.mapping`: its tools as ipyagent tools, its results as tool outputs;
- :mod:`.servers`: :class:`McpServers`, what an agent or a kernel holds.
"""

from .config import ServerConfig, configured_servers, parse_server, parse_servers
from .servers import McpServers, ServerStatus, servers_for_agent

__all__ = [
    "McpServers",
    "ServerConfig",
    "ServerStatus",
    "configured_servers",
    "parse_server",
    "parse_servers",
    "servers_for_agent",
]
