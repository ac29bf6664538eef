"""What an MCP server entry says, read from the config file, a notebook folder or code.

The shape is the ``mcpServers`` one other MCP clients use: a stdio server has ``command``,
``args``, ``env`` (and ``cwd``); a streamable-HTTP server has ``url`` and ``headers``. ipyagent
adds ``trusted`` (enable without asking; only in the user's own config file or in code),
``timeout`` (seconds per call), ``startup_timeout``, ``enabled`` and ``max_result_bytes`` (the
largest message read from the server; longer ones are cut). Values may name
environment variables as ``${NAME}``, so a token stays in the environment, not in the file.

Where entries come from, later ones winning by name:

- ``[mcp_servers.NAME]`` tables in ``~/.config/ipyagent/config.toml``;
- ``.mcp.json`` (``{"mcpServers": {...}}``) in the notebook's folder; it cannot trust a server,
  and its entries are marked ``from_folder``: one starts only once a person approved that exact
  entry, by its :meth:`ServerConfig.digest` (see :mod:`.approvals`);
- ``Agent(mcp={...})`` and ``%agent mcp add``.

This module parses and validates; it starts nothing (see :mod:`.connection`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..config_file import config_path, read_config
from ..errors import UserError
from ..redact import redact_url

__all__ = ["ServerConfig", "configured_servers", "parse_server", "parse_servers", "project_file"]

#: A server's name becomes the prefix of its tools' names, which providers limit to these.
_NAME = re.compile(r"[A-Za-z0-9_-]{1,32}")
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_KEYS = (
    "command", "args", "env", "cwd", "url", "headers", "type", "trusted", "timeout",
    "startup_timeout", "enabled", "max_result_bytes",
)  # fmt: skip
#: A server's message larger than this is cut while it is read (``max_result_bytes``).
DEFAULT_MAX_RESULT_BYTES = 1_000_000
_EXAMPLE = (
    'command = "python", args = ["-m", "mcp_server_time"] for a local server, '
    'or url = "http://127.0.0.1:8000/mcp" for one over HTTP'
)


@dataclass(frozen=True)
class ServerConfig:
    """One MCP server: how to reach it and how far to trust it."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    #: Enabled without asking the user.
    trusted: bool = False
    #: Seconds one tool call may take (``None``: the agent's ``tool_timeout``).
    timeout: float | None = None
    #: Seconds the server may take to start and list its tools.
    startup_timeout: float = 30.0
    enabled: bool = True
    #: Bytes of one message read from the server at most (a result's JSON-RPC line); past it,
    #: the result is cut while it is read (stdio; see :mod:`.stdio`).
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES
    #: Where the entry was read (a file, "code", "%agent mcp add"), for messages.
    source: str = "code"
    #: Why an entry of a file cannot be used, and its fix: such a server is listed, never
    #: started, and a run says so instead of failing (the file may be another client's too).
    problem: str = ""
    problem_hint: str = ""
    #: Read from a notebook folder's ``.mcp.json``: what the folder says, not what the user wrote,
    #: so neither ``trusted`` nor ``auto_approve`` starts it; a person's approval of its digest does.
    from_folder: bool = False

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"

    @property
    def target(self) -> str:
        """What the user recognizes the server by: its command line or its URL, credentials
        masked (a hosted server often takes its key in the URL's path or query)."""
        if self.command is not None:
            return " ".join([self.command, *self.args])
        return redact_url(self.url or "")

    def digest(self) -> str:
        """What an approval covers, as ``sha256:<hex>``: the folder's file the entry is in (the same
        ``python server.py`` is another program in another folder), the command, args, cwd, URL,
        and the env variables and headers with their values *as written* (a ``${VAR}`` stays the
        template, so the digest holds no secret). Any change to these is asked about again."""
        canonical = {
            "version": 1,
            "file": self.source if self.from_folder else None,
            "command": self.command,
            "args": list(self.args),
            "cwd": self.cwd,
            "url": self.url,
            "env": dict(sorted(self.env.items())),
            "headers": dict(sorted(self.headers.items())),
        }
        text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()

    def variables(self) -> dict[str, list[str]]:
        """For each env variable and header (``env:NAME``, ``header:NAME``) whose value expands
        ``${VAR}``: the variables it hands over."""
        found = {f"env:{k}": _VARIABLE.findall(v) for k, v in self.env.items()}
        found.update({f"header:{k}": _VARIABLE.findall(v) for k, v in self.headers.items()})
        return {k: v for k, v in found.items() if v}


def parse_server(
    name: str, entry: Mapping[str, Any] | ServerConfig, *, source: str = "code", shared: bool = False
) -> ServerConfig:
    """A validated :class:`ServerConfig` from one ``mcpServers`` entry; a bad entry raises a
    :class:`UserError` naming the key and what to write. ``shared``: the entry is in a file other
    MCP clients read too, so keys of theirs are ignored (and their ``disabled`` understood)."""
    if isinstance(entry, ServerConfig):
        return entry
    where = f"In {source}, MCP server {name!r}"
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise _invalid(
            f"In {source}, the MCP server name {name!r} is not allowed.",
            "Use 1-32 letters, digits, '_' or '-' (it prefixes the server's tool names), e.g. 'time'.",
        )
    if not isinstance(entry, Mapping):
        raise _invalid(f"{where} must be a table of settings.", f"Write e.g. {_EXAMPLE}.")
    if shared:
        disabled = entry.get("disabled")
        entry = {k: v for k, v in entry.items() if k in _KEYS}
        if isinstance(disabled, bool) and "enabled" not in entry:
            entry["enabled"] = not disabled
    unknown = sorted(set(entry) - set(_KEYS))
    if unknown:
        raise _invalid(f"{where} has unknown keys: {', '.join(unknown)}.", f"Known keys: {', '.join(_KEYS)}.")
    kind = entry.get("type")
    if kind is not None and kind not in ("stdio", "http", "streamable-http", "streamableHttp"):
        raise _invalid(
            f"{where}: type = {kind!r} is not supported.",
            "Use a stdio server (command) or a streamable-HTTP one (url); the older SSE transport is not "
            "supported.",
        )
    command, url = entry.get("command"), entry.get("url")
    if (command is None) == (url is None):
        raise _invalid(f"{where} needs either 'command' or 'url' (not both).", f"Write e.g. {_EXAMPLE}.")
    if command is not None and (not isinstance(command, str) or not command.strip()):
        raise _invalid(f"{where}: 'command' must be a program name.", 'Write e.g. command = "python".')
    if url is not None and (not isinstance(url, str) or not url.startswith(("http://", "https://"))):
        raise _invalid(
            f"{where}: 'url' must be an http:// or https:// URL.",
            'Write e.g. url = "http://127.0.0.1:8000/mcp".',
        )
    args = entry.get("args", [])
    if not isinstance(args, list | tuple) or not all(isinstance(a, str) for a in args):
        raise _invalid(
            f"{where}: 'args' must be a list of strings.", 'Write e.g. args = ["-m", "mcp_server_time"].'
        )
    env = _strings(entry.get("env", {}), where, "env", 'env = { TZ = "UTC" }')
    headers = _strings(
        entry.get("headers", {}), where, "headers", 'headers = { Authorization = "Bearer ${TOKEN}" }'
    )
    cwd = entry.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise _invalid(f"{where}: 'cwd' must be a folder path.", 'Write e.g. cwd = "/path/to/folder".')
    for key in ("trusted", "enabled"):
        if key in entry and not isinstance(entry[key], bool):
            raise _invalid(f"{where}: '{key}' must be true or false.", f"Write e.g. {key} = true.")
    timeout = _seconds(entry.get("timeout"), where, "timeout")
    startup = _seconds(entry.get("startup_timeout", 30.0), where, "startup_timeout")
    max_bytes = entry.get("max_result_bytes", DEFAULT_MAX_RESULT_BYTES)
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1024:
        raise _invalid(
            f"{where}: 'max_result_bytes' must be a whole number of bytes, at least 1024.",
            "Write e.g. max_result_bytes = 5000000 (5 MB; the default is 1000000).",
        )
    return ServerConfig(
        name=name,
        command=command,
        args=tuple(args),
        env=env,
        cwd=cwd,
        url=url,
        headers=headers,
        trusted=bool(entry.get("trusted", False)),
        timeout=timeout,
        startup_timeout=startup if startup is not None else 30.0,
        enabled=bool(entry.get("enabled", True)),
        max_result_bytes=max_bytes,
        source=source,
    )


def parse_servers(entries: Mapping[str, Any], *, source: str = "code") -> dict[str, ServerConfig]:
    """Every entry of an ``mcpServers`` mapping, validated."""
    if not isinstance(entries, Mapping):
        raise _invalid(
            f"In {source}, the MCP servers must be a mapping of names to settings.",
            'Write e.g. {"time": {"command": "python", "args": ["-m", "mcp_server_time"]}}.',
        )
    return {name: parse_server(name, entry, source=source) for name, entry in entries.items()}


def project_file(workspace: Path) -> Path:
    """The notebook folder's MCP servers: ``.mcp.json``, the file other MCP clients read too."""
    return workspace / ".mcp.json"


def configured_servers(workspace: Path | None) -> dict[str, ServerConfig]:
    """The servers of the user's config file, then of the workspace's ``.mcp.json``. An entry
    that cannot be used comes with its ``problem`` instead of failing every run."""
    path = config_path()
    table = read_config(path).get("mcp_servers", {})
    servers = _from_file(table, source=str(path), shared=False)
    if workspace is not None:
        servers.update(_read_project(project_file(workspace)))
    return servers


def _from_file(entries: Any, *, source: str, shared: bool) -> dict[str, ServerConfig]:
    if not isinstance(entries, Mapping):
        raise _invalid(
            f"In {source}, the MCP servers must be a mapping of names to settings.",
            "Write a table per server: [mcp_servers.NAME] in config.toml, "
            '{"mcpServers": {"NAME": {...}}} in .mcp.json.',
        )
    servers: dict[str, ServerConfig] = {}
    for name, entry in entries.items():
        try:
            server = parse_server(name, entry, source=source, shared=shared)
            if shared and server.trusted:
                raise _invalid(
                    f"In {source}, MCP server {name!r} says trusted = true; a notebook folder may not.",
                    "Remove 'trusted' there (the server is then asked about once), or trust it in your own "
                    f"config file: [mcp_servers.{name}] trusted = true in {config_path()}.",
                )
        except UserError as exc:
            server = ServerConfig(
                name=str(name), source=source, problem=exc.info.message, problem_hint=exc.info.hint
            )
        servers[str(name)] = server
    return servers


def _read_project(path: Path) -> dict[str, ServerConfig]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise _invalid(
            f"Could not read {path}: {exc}", 'Fix the file: it is JSON, {"mcpServers": {...}}.'
        ) from exc
    entries = data.get("mcpServers", {}) if isinstance(data, dict) else None
    # The folder resolved (a symlinked folder is the folder it points to), the file name kept: an
    # approval is of this folder's entry, and a .mcp.json that links to an approved file elsewhere
    # still runs its relative paths here.
    source = str(path.parent.resolve() / path.name)
    servers = _from_file(entries, source=source, shared=True)
    return {name: replace(server, from_folder=True) for name, server in servers.items()}


def expand(value: str, *, what: str) -> str:
    """``value`` with each ``${NAME}`` replaced by that environment variable."""

    def lookup(match: re.Match[str]) -> str:
        name = match.group(1)
        found = os.environ.get(name)
        if found is None:
            raise _invalid(
                f"{what} uses ${{{name}}}, and the environment variable {name} is not set.",
                f"Set {name} in the environment the kernel starts from, then run again.",
            )
        return found

    return _VARIABLE.sub(lookup, value)


def _strings(value: Any, where: str, key: str, example: str) -> dict[str, str]:
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise _invalid(f"{where}: '{key}' must be a table of strings.", f"Write e.g. {example}.")
    return dict(value)


def _seconds(value: Any, where: str, key: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise _invalid(f"{where}: '{key}' must be a number of seconds above 0.", f"Write e.g. {key} = 30.")
    return float(value)


def _invalid(message: str, hint: str) -> UserError:
    return UserError(message, hint=hint, code="invalid_mcp_config")
