"""The MCP servers of an agent (or of a kernel's conversations): their configuration, which
ones the user enabled, and their connections, kept alive across runs.

Each run asks :meth:`McpServers.tools_for_run` for the servers' tools. A server is started on
the first run that needs it, after the user enabled it: a question asked once (an answer holds
until the entry changes). For a server the user configured (the config file, code, ``%agent mcp
add``) the question is skipped when it is marked ``trusted`` and in a run that may change things
without asking. A server of a notebook folder's ``.mcp.json`` is what the folder says, so neither
skips it: it starts once a person approved that exact entry, remembered by digest outside the
folder (:mod:`.approvals`). A run nobody can answer (headless) leaves a server off and says how
to enable it. The connections live on a loop of their own (one thread per
:class:`McpServers`), so whichever loop a run is on (the kernel's worker loop, ``asyncio.run``
of ``run_sync``), a server outlives it, and a call is one hop to that loop and back.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import threading
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..background import BackgroundLoop
from ..config_file import config_path
from ..errors import ErrorInfo, UserError
from ..tool_sources import SourceContext, SourcedTools
from ..tools import Tool, ToolOutput
from . import approvals
from .config import ServerConfig, configured_servers, parse_server, parse_servers
from .connection import Connection, ServerGone, require_sdk
from .mapping import make_tool, result_output, tool_name

__all__ = ["McpServers", "ServerStatus", "servers_for_agent"]

ALLOW, DENY = "Allow", "Deny"
#: Seconds :meth:`McpServers.close` waits for the servers to stop.
_CLOSE_WAIT = 15.0


@dataclass(frozen=True)
class ServerStatus:
    """One line of ``%agent mcp list``."""

    name: str
    transport: str
    target: str
    source: str
    #: ``disabled``, ``not enabled yet``, ``denied``, ``stopped``, ``starting``, ``running`` or ``failed``.
    state: str
    tools: tuple[str, ...] = ()
    error: str = ""
    #: For a server of a folder's file: whether a person approved this entry, and its digest.
    approval: str = ""

    def __str__(self) -> str:
        detail = f" ({len(self.tools)} tools)" if self.state == "running" else ""
        where = f"  {self.transport}: {self.target}  [{self.source}]"
        lines = [f"{self.name:<14} {self.state}{detail}", where]
        if self.approval:
            lines.append(f"  {self.approval}")
        if self.tools:
            lines.append(f"  tools: {', '.join(self.tools)}")
        if self.error:
            lines.extend(f"  {line}" for line in self.error.splitlines()[-8:])
        return "\n".join(lines)


class McpServers:
    """MCP servers whose tools join an agent's runs (see ``Agent(mcp=...)``).

    Args:
        servers: ``{"name": {"command": ..., "args": [...], "env": {...}}}`` or
            ``{"name": {"url": ..., "headers": {...}}}`` (the ``mcpServers`` shape).
        workspace: The notebook folder whose ``.mcp.json`` is read.
        read_config: Also read ``[mcp_servers.NAME]`` of the config file and the workspace's
            ``.mcp.json`` (at each run, so edits apply to the next one).
    """

    def __init__(
        self,
        servers: Mapping[str, Any] | None = None,
        *,
        workspace: str | Path | None = None,
        read_config: bool = True,
    ) -> None:
        self._given = parse_servers(servers or {})
        self.workspace = Path(workspace) if workspace is not None else None
        self.read_config = read_config
        self._lock = threading.Lock()
        #: Names removed with :meth:`remove`: hidden even when a file configures them.
        self._removed: set[str] = set()
        self._decided: dict[str, tuple[str, str]] = {}  # name -> (ALLOW|DENY, the entry's digest)
        self._connections: dict[str, Connection] = {}
        self._loop = BackgroundLoop("ipyagent-mcp")

    # -- configuration ---------------------------------------------------------------------------

    def servers(self) -> dict[str, ServerConfig]:
        """Every server configured now: files (when read), then code, minus removed ones."""
        found = configured_servers(self.workspace) if self.read_config else {}
        with self._lock:
            found.update(self._given)
            return {name: config for name, config in found.items() if name not in self._removed}

    def add(
        self, name: str, entry: Mapping[str, Any] | ServerConfig, *, source: str = "code"
    ) -> ServerConfig:
        """Add (or replace) server ``name``; it starts at the next run, once enabled."""
        config = parse_server(name, entry, source=source)
        with self._lock:
            self._given[name] = config
            self._removed.discard(name)
        self._drop_connection(name)
        return config

    def remove(self, name: str) -> bool:
        """Stop server ``name`` and leave it out from now on; False when there is none."""
        known = name in self.servers()
        with self._lock:
            self._given.pop(name, None)
            self._removed.add(name)
            self._decided.pop(name, None)
        self._drop_connection(name)
        return known

    def allow(self, name: str) -> ServerConfig | None:
        """Enable server ``name`` without asking (this object's lifetime; e.g. after a denial).
        A server of a folder's file is a person's approval of that exact entry: it is remembered
        outside the folder (:func:`.approvals.remember`), for later kernels too."""
        config = self.servers().get(name)
        if config is not None:
            if config.from_folder and not config.problem:
                approvals.remember(config)
            with self._lock:
                self._decided[name] = (ALLOW, config.digest())
        return config

    def status(self) -> list[ServerStatus]:
        """Each server's state, for ``%agent mcp list``."""
        rows = []
        for name, config in sorted(self.servers().items()):
            connection = self._connections.get(name)
            decision = self._decision(config)
            error = approval = ""
            approved = False
            if config.from_folder and not config.problem:
                try:
                    approved = approvals.is_approved(config)
                except UserError as exc:
                    error = f"{exc.info.message} {exc.info.hint}"
                word = "approved" if approved else f"not approved (allow: %agent mcp allow {name})"
                approval = f"a folder's entry, {word}; digest {config.digest()}"
            tools: tuple[str, ...] = ()
            if config.problem:
                state, error = "invalid", f"{config.problem} {config.problem_hint}"
            elif not config.enabled:
                state = "disabled"
            elif connection is not None and connection.state != "stopped":
                state = connection.state
                error = connection.error
                tools = tuple(tool_name(name, t.name) for t in connection.tools)
            elif decision == DENY:
                state = "denied"
            elif decision is None and not (config.trusted or (config.from_folder and approved)):
                state = "not enabled yet"
            else:
                state = "stopped"
            transport = "(unusable entry)" if config.problem else config.transport
            # What a file says is shown as it is: no line break or escape of it can fake a line.
            target, source = approvals.command_line(config), approvals.visible(config.source)
            rows.append(ServerStatus(name, transport, target, source, state, tools, error, approval))
        return rows

    # -- runs ------------------------------------------------------------------------------------

    async def tools_for_run(self, context: SourceContext) -> SourcedTools:
        """The tools of every enabled server, starting those not running (see the module doc)."""
        configs = [c for c in self.servers().values() if c.enabled]
        notes: list[str] = []
        problems: list[ErrorInfo] = []
        for config in [c for c in configs if c.problem]:  # an entry of a file that cannot be used
            notes.append(f"The MCP server `{config.name}` is misconfigured; its tools are not available.")
            problems.append(_problem(config, config.problem, hint=config.problem_hint))
        configs = [c for c in configs if not c.problem]
        if not configs:
            return SourcedTools(notes=notes, problems=problems)
        try:
            require_sdk()
        except UserError as exc:
            info = exc.info
            names = ", ".join(c.name for c in configs)
            notes.append(f"The MCP servers {names} are not available: {info.message}")
            return SourcedTools(notes=notes, problems=[*problems, info])
        enabled: list[ServerConfig] = []
        for config in configs:
            refusal = await self._enable(config, context)
            if refusal is None:
                enabled.append(config)
            elif refusal is not _DECLINED_BEFORE:
                notes.append(
                    f"The MCP server `{config.name}` is not enabled ({refusal[0]}); "
                    "its tools are not available."
                )
                problems.append(refusal[1])
        _open.add(self)  # stopped at exit, unless closed before
        connections = await self._on_loop(self._start_all(enabled))
        tools: list[Tool] = []
        for config in enabled:
            connection = connections[config.name]
            if connection.state != "running":
                notes.append(
                    f"The MCP server `{config.name}` could not be started, so its tools are not available: "
                    f"{connection.error}"
                )
                problems.append(
                    _problem(
                        config, f"The MCP server {config.name!r} could not be started: {connection.error}"
                    )
                )
                continue
            tools.extend(self._tools_of(config, connection, taken={t.name for t in tools}))
        return SourcedTools(tools=tools, notes=notes, problems=problems)

    async def _enable(self, config: ServerConfig, context: SourceContext) -> tuple[str, ErrorInfo] | None:
        """None when ``config`` may start; else what the model is told and the user's warning
        (:data:`_DECLINED_BEFORE`: nothing, both heard it when the user declined)."""
        decision = self._decision(config)
        if decision == DENY:
            return _DECLINED_BEFORE
        if config.from_folder:
            # What the folder says: only a person's approval of this exact entry starts it.
            try:
                if decision == ALLOW or approvals.is_approved(config):
                    return None
            except UserError as exc:
                info = exc.info
                return "its approvals could not be read", _problem(config, info.message, hint=info.hint)
            question, hint = approvals.question(config), approvals.how_to_allow(config)
            headless = approvals.not_started(config)
        elif decision == ALLOW or config.trusted or context.auto_approve:
            return None
        else:
            question = (
                f"Enable the MCP server `{config.name}`? It runs `{config.target}` (from {config.source}), "
                "and its tools join this conversation."
            )
            hint = (
                f"To enable it without asking, set trusted = true in [mcp_servers.{config.name}] of "
                f"{config_path()} (or in Agent(mcp=...)), or run with auto_approve=True (%%agent -y)."
            )
            headless = f"The MCP server {config.name!r} was not enabled: nobody could approve it in this run."
        answer = await context.ask(question, [ALLOW, DENY])
        if answer is None:  # nobody could answer: asked again when someone can
            return "nobody could approve it in this run", _problem(config, headless, hint=hint)
        allowed = answer.strip().lower() in ("allow", "yes", "y", "always")
        if allowed and config.from_folder:
            # Not kept (a read-only home, say): the answer still holds for this object's life.
            with contextlib.suppress(OSError, UserError):
                approvals.remember(config)
        with self._lock:
            self._decided[config.name] = (ALLOW if allowed else DENY, config.digest())
        if allowed:
            return None
        return "the user declined it", _problem(
            config,
            f"The MCP server {config.name!r} stays off: it was declined.",
            hint=f"To enable it later: %agent mcp allow {config.name}.",
        )

    def _decision(self, config: ServerConfig) -> str | None:
        with self._lock:
            decided = self._decided.get(config.name)
        if decided is None or decided[1] != config.digest():
            return None
        return decided[0]

    async def _start_all(self, configs: list[ServerConfig]) -> dict[str, Connection]:
        """On the MCP loop: check the running servers and start the others, together."""
        connections: dict[str, Connection] = {}
        for config in configs:
            connection = self._connections.get(config.name)
            if connection is None or connection.config != config:
                if connection is not None:
                    await connection.stop()
                connection = self._connections[config.name] = Connection(config)
            connections[config.name] = connection
        await asyncio.gather(*(c.ensure() for c in connections.values()))
        return connections

    def _tools_of(self, config: ServerConfig, connection: Connection, *, taken: set[str]) -> list[Tool]:
        async def call(remote: str, arguments: dict[str, Any]) -> ToolOutput:
            try:
                result = await self._on_loop(connection.call(remote, arguments, None))
            except ServerGone as exc:
                return ToolOutput(
                    text=f"The MCP server `{config.name}` is not available: {exc}. Its tools cannot be used "
                    "until it is started again (at the next run).",
                    is_error=True,
                )
            except Exception as exc:
                return ToolOutput(
                    text=f"The MCP server `{config.name}` answered with an error: {exc}", is_error=True
                )
            return result_output(result)

        tools: list[Tool] = []
        for remote in connection.tools:
            built = make_tool(config.name, remote, call, timeout=config.timeout, taken=taken)
            taken.add(built.name)
            tools.append(built)
        return tools

    async def _on_loop(self, coro: Any) -> Any:
        """Await ``coro`` on the MCP loop; cancelling the caller cancels it there."""
        return await asyncio.wrap_future(self._loop.submit(coro))

    # -- shutting down ---------------------------------------------------------------------------

    def _drop_connection(self, name: str) -> None:
        connection = self._connections.pop(name, None)
        if connection is not None:
            self._loop.submit(connection.stop()).result(timeout=_CLOSE_WAIT)

    def close(self) -> None:
        """Stop every server (their processes end) and the loop they run on. A later run starts
        them again."""
        _open.discard(self)
        connections, self._connections = list(self._connections.values()), {}
        if connections:

            async def stop_all() -> None:
                await asyncio.gather(*(c.stop() for c in connections), return_exceptions=True)

            with contextlib.suppress(Exception):  # closing: the process ends them anyway
                self._loop.submit(stop_all()).result(timeout=_CLOSE_WAIT)
        self._loop.stop()

    def __repr__(self) -> str:
        return f"McpServers({sorted(self.servers())})"


#: A server the user declined in an earlier run: its tools are left out without a word.
_DECLINED_BEFORE = ("", ErrorInfo(code="mcp_server_declined", layer="tool", message=""))


def _problem(config: ServerConfig, message: str, *, hint: str = "") -> ErrorInfo:
    return ErrorInfo(
        code="mcp_server_unavailable",
        layer="tool",
        severity="warning",
        message=message,
        hint=hint
        or f"Check the server's command or URL in {config.source}; `%agent mcp list` shows its state.",
    )


_open: weakref.WeakSet[McpServers] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    """At exit, stop the servers still running (a stdio server would otherwise be left behind)."""
    for servers in list(_open):
        servers.close()


def servers_for_agent(
    mcp: McpServers | Mapping[str, Any] | bool | None, workspace: Path
) -> tuple[McpServers, bool]:
    """The MCP servers of an agent given ``Agent(mcp=...)`` (not ``False``), and whether the agent
    owns them (closes them with itself): a shared :class:`McpServers` is the caller's."""
    if isinstance(mcp, McpServers):
        return mcp, False
    if isinstance(mcp, Mapping) and mcp:
        require_sdk()  # asked for by name: say now how to install it
    given = mcp if isinstance(mcp, Mapping) else None
    return McpServers(given, workspace=workspace), True
