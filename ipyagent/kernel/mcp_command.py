"""``%agent mcp``: list, add, remove and allow the kernel's MCP servers.

``allow`` of a server of the notebook folder's ``.mcp.json`` is a person approving that exact
entry: it is remembered by digest outside the folder (see ``agentlib/mcp_servers/approvals.py``).
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..agentlib.mcp_servers import McpServers

__all__ = ["mcp_command"]

USAGE = (
    "%agent mcp list | add NAME [--trust] [--env K=V] [--header K=V] COMMAND [ARGS...] | add NAME URL "
    "| remove NAME | allow NAME"
)


def mcp_command(servers: McpServers, words: list[str]) -> str:
    """Do ``%agent mcp <words>`` and say what happened."""
    # The magic splits its line on spaces; join and split again so that quotes group words.
    words = shlex.split(" ".join(words))
    action, rest = (words[0], words[1:]) if words else ("list", [])
    if action == "list":
        return _list(servers)
    if action == "add":
        return _add(servers, rest)
    if action in ("remove", "allow") and len(rest) == 1:
        name = rest[0]
        if name not in servers.servers():
            raise _usage(f"There is no MCP server {name!r}.", "See %agent mcp list.")
        if action == "remove":
            servers.remove(name)
            return f"Removed the MCP server {name!r}: it is stopped, and left out for this kernel."
        config = servers.allow(name)
        if config is not None and config.from_folder:
            from ..agentlib.mcp_servers.approvals import approvals_path, describe

            return (
                f"Approved the MCP server {name!r} of the folder's file, as it is now:\n{describe(config)}\n"
                f"It starts at the next run, in this kernel and later ones (kept in {approvals_path()}); "
                "a changed entry is asked about again."
            )
        return f"The MCP server {name!r} is enabled: it starts at the next run."
    raise _usage(f"Unknown or incomplete command: %agent mcp {' '.join(words)}", f"Use {USAGE}.")


def _list(servers: McpServers) -> str:
    rows = servers.status()
    if not rows:
        return (
            "No MCP servers. Add one with %agent mcp add NAME COMMAND [ARGS...] (or URL), in "
            "[mcp_servers.NAME] of ~/.config/ipyagent/config.toml, or in the notebook folder's .mcp.json."
        )
    return "\n".join(str(row) for row in rows)


def _add(servers: McpServers, words: list[str]) -> str:
    if not words:
        raise _usage("%agent mcp add needs a name and a command or URL.", f"Use {USAGE}.")
    name, words = words[0], words[1:]
    entry: dict[str, Any] = {}
    env: dict[str, str] = {}
    headers: dict[str, str] = {}
    while words and words[0].startswith("--"):
        flag = words.pop(0)
        if flag == "--trust":
            entry["trusted"] = True
        elif flag in ("--env", "--header") and words and "=" in words[0]:
            key, value = words.pop(0).split("=", 1)
            (env if flag == "--env" else headers)[key] = value
        else:
            raise _usage(f"%agent mcp add: {flag} is not understood here.", f"Use {USAGE}.")
    if not words:
        raise _usage(f"%agent mcp add {name}: which command or URL?", f"Use {USAGE}.")
    if len(words) == 1 and words[0].startswith(("http://", "https://")):
        entry["url"] = words[0]
    else:
        entry["command"], entry["args"] = words[0], words[1:]
    if env:
        entry["env"] = env
    if headers:
        entry["headers"] = headers
    config = servers.add(name, entry, source="%agent mcp add")
    when = "at the next run" if config.trusted else "at the next run, once you allow it"
    return f"Added the MCP server {name!r} ({config.target}): it starts {when}."


def _usage(message: str, hint: str) -> Exception:
    from ..agentlib.errors import UserError

    return UserError(message, hint=hint, code="invalid_mcp_command")
