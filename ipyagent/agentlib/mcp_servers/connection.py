"""One MCP server's connection, owned by one task.

The SDK is built on anyio: a transport and its session are context managers whose cancel
scopes must be entered and exited by the same task. So each server gets one owner task that
enters them, lists the tools, and then waits until it is told to stop or the server goes away;
tool calls from any other task go through the session it holds. Everything here runs on the
MCP loop (see :mod:`.servers`), never on the caller's.

States: ``stopped`` → ``starting`` → ``running``; a start that fails, or a server that dies
or stops answering, leaves ``failed`` with the reason (and the server's last words on stderr).
Each run asks a running server for its tools again (the check that it is alive), and starts a
stopped or failed one again.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from typing import Any, Literal

from ..errors import UserError
from .config import ServerConfig, expand

__all__ = ["Connection", "ServerState", "require_sdk"]

ServerState = Literal["stopped", "starting", "running", "failed"]

#: Seconds a server gets to close when it is stopped.
_CLOSE_TIMEOUT = 5.0
#: The end of a server's stderr kept for its error message.
_STDERR_TAIL = 1500


def require_sdk() -> None:
    """Raise a :class:`UserError` that says how to install the MCP SDK when it is missing."""
    try:
        import mcp  # noqa: F401
    except ImportError as exc:
        raise UserError(
            "MCP servers need the `mcp` package (the Model Context Protocol SDK), which is not installed.",
            hint="pip install 'ipyagent[mcp]', then restart the kernel.",
            code="mcp_not_installed",
        ) from exc


class Connection:
    """The live connection to one server. Create, :meth:`ensure`, :meth:`call`, :meth:`stop` —
    all on the MCP loop."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.state: ServerState = "stopped"
        self.error = ""
        #: The server's tools (``mcp_types.Tool``) as it listed them when it started.
        self.tools: list[Any] = []
        self._client: Any = None
        self._stop: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._stderr: Any = None
        # Two runs may want the server at once (a cell and a chat): one starts it, both get it.
        self._starting = asyncio.Lock()

    async def ensure(self) -> None:
        """Have the server running: a running one is asked for its tools again (it may have gone
        away, or changed them, since the last run), a stopped or failed one started. On failure
        the state is ``failed``."""
        async with self._starting:
            if self.state == "running" and not await self._relisted():
                await self._finish_task()
            if self.state != "running":
                await self._start()

    async def _relisted(self) -> bool:
        """Whether the running server still answers (its tools are listed afresh)."""
        client = self._client
        if client is None:
            return False
        try:
            self.tools = await asyncio.wait_for(_list_tools(client), self.config.startup_timeout)
        except asyncio.TimeoutError:
            self._fail("it stopped answering (no list of tools within startup_timeout)")
            return False
        except Exception as exc:
            self._fail(f"it stopped answering ({_describe(exc)})")
            return False
        return True

    async def _start(self) -> None:
        await self._finish_task()
        self.state, self.error, self.tools = "starting", "", []
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._stop = asyncio.Event()
        self._task = asyncio.create_task(self._own(ready, self._stop), name=f"mcp-server-{self.config.name}")
        timeout = self.config.startup_timeout
        try:
            await asyncio.wait_for(asyncio.shield(ready), timeout)
        except asyncio.TimeoutError:
            # Nobody waits for `ready` any more: settled now, the owner task's end cannot leave an
            # exception in it that is never retrieved (printed into a later cell at GC).
            ready.cancel()
            await self._finish_task(cancel=True)
            self._fail(f"it did not start within {timeout:g} s (startup_timeout)")
        except Exception as exc:
            await self._finish_task()
            self._fail(_describe(exc))

    async def call(self, name: str, arguments: dict[str, Any], timeout: float | None) -> Any:
        """Call tool ``name``; returns the ``CallToolResult``. Raises :class:`ServerGone` when
        the server is not running or went away during the call."""
        client = self._client
        if self.state != "running" or client is None:
            raise ServerGone(self.error or f"it is {self.state}")
        try:
            return await client.call_tool(name, arguments, read_timeout_seconds=timeout)
        except Exception as exc:
            if _connection_lost(exc):
                self._fail(f"it stopped answering ({_describe(exc)})")
                if self._stop is not None:
                    self._stop.set()
                raise ServerGone(self.error) from exc
            raise

    async def stop(self) -> None:
        """Close the session and the server (a stdio server's process ends)."""
        await self._finish_task()
        self._close_stderr()
        if self.state != "failed":
            self.state = "stopped"

    # -- the owner task --------------------------------------------------------------------------

    async def _own(self, ready: asyncio.Future[None], stop: asyncio.Event) -> None:
        # The tools' arguments are checked with jsonschema on the caller's loop (the kernel's);
        # its first import takes seconds (its format checkers), so it is done here, on a thread.
        schema_checks = asyncio.ensure_future(asyncio.to_thread(_import_jsonschema))
        try:
            async with contextlib.AsyncExitStack() as stack:
                client = await stack.enter_async_context(await self._client_for(stack))
                self.tools = await _list_tools(client)
                await schema_checks
                self._client = client
                self.state = "running"
                ready.set_result(None)
                await stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(repr(exc)))
            elif isinstance(exc, Exception):  # died while running
                self._fail(_describe(exc))
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            schema_checks.cancel()  # a start that failed first: the import goes on, unawaited
            self._client = None
            if self.state == "running":
                self.state = "stopped"

    async def _client_for(self, stack: contextlib.AsyncExitStack) -> Any:
        from mcp import Client
        from mcp_types import Implementation

        from ...__about__ import __version__

        info = Implementation(name="ipyagent", version=__version__)
        config = self.config
        if config.command is not None:
            # The server's stderr goes to a file: read back in its error message when it fails,
            # and kept out of the notebook (a kernel's stderr is a cell's output).
            # Kept open after the server ends, to be read; closed at the next start or stop.
            self._close_stderr()
            self._stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
            what = f"MCP server {config.name!r}"
            env = {k: expand(v, what=f"{what}'s env {k}") for k, v in config.env.items()}
            if os.name == "posix":  # our transport: bounded reads, no process left behind
                from mcp.client.stdio import get_default_environment

                from .stdio import StdioServer, stdio_transport

                server = StdioServer(
                    name=config.name,
                    command=config.command,
                    args=config.args,
                    env=get_default_environment() | env,
                    cwd=config.cwd,
                    max_bytes=config.max_result_bytes,
                )
                return Client(stdio_transport(server, errlog=self._stderr), client_info=info)
            from mcp.client.stdio import StdioServerParameters, stdio_client

            params = StdioServerParameters(
                command=config.command, args=list(config.args), env=env or None, cwd=config.cwd
            )
            return Client(stdio_client(params, errlog=self._stderr), client_info=info)
        import httpx2  # the HTTP client the SDK is built on
        from mcp.client.streamable_http import streamable_http_client

        headers = {
            k: expand(v, what=f"MCP server {config.name!r}'s header {k}") for k, v in config.headers.items()
        }
        # The SDK's own defaults: a server may hold a response stream open for minutes.
        timeout = httpx2.Timeout(30.0, read=300.0)
        # A JSON answer is cut at max_result_bytes by our transport, an event stream's events by the SDK.
        from .capped import CappedTransport

        transport = CappedTransport(httpx2.AsyncHTTPTransport(), config.max_result_bytes)
        http = await stack.enter_async_context(
            httpx2.AsyncClient(headers=headers, timeout=timeout, transport=transport)
        )
        assert config.url is not None
        cap = config.max_result_bytes
        return Client(
            streamable_http_client(config.url, http_client=http, max_sse_event_size=cap), client_info=info
        )

    async def _finish_task(self, *, cancel: bool = False) -> None:
        task, self._task = self._task, None
        if task is None:
            return
        if self._stop is not None:
            self._stop.set()
        if cancel:
            task.cancel()
        done, _ = await asyncio.wait({task}, timeout=_CLOSE_TIMEOUT)
        if not done:  # a transport that does not close: cancel it
            task.cancel()
            await asyncio.wait({task}, timeout=_CLOSE_TIMEOUT)

    def _fail(self, reason: str) -> None:
        self.state = "failed"
        tail = self._stderr_tail()
        self.error = f"{reason}; its stderr ended with:\n{tail}" if tail else reason

    def _close_stderr(self) -> None:
        stderr, self._stderr = self._stderr, None
        if stderr is not None:
            stderr.close()

    def _stderr_tail(self) -> str:
        stderr = self._stderr
        if stderr is None or stderr.closed:
            return ""
        try:
            stderr.flush()
            stderr.seek(0)
            text: str = stderr.read()
        except (OSError, ValueError):
            return ""
        return text.strip()[-_STDERR_TAIL:]


class ServerGone(Exception):
    """The server is not running, or went away during a call; ``str()`` says why."""


async def _list_tools(client: Any) -> list[Any]:
    tools: list[Any] = []
    cursor: str | None = None
    for _ in range(100):  # a server that pages forever
        page = await client.list_tools(cursor=cursor, cache_mode="refresh")
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


def _import_jsonschema() -> None:
    with contextlib.suppress(ImportError):  # installed with the SDK; without it nothing is checked
        import jsonschema  # noqa: F401


def _connection_lost(exc: BaseException) -> bool:
    from mcp.shared.exceptions import MCPError

    if isinstance(exc, MCPError):
        return "connection closed" in str(exc).lower()
    import anyio

    return isinstance(exc, anyio.ClosedResourceError | anyio.BrokenResourceError | ConnectionError | EOFError)


def _describe(exc: BaseException) -> str:
    """A failure as one line: exception groups (anyio's task groups) by their first leaf."""
    while (leaves := getattr(exc, "exceptions", None)) and isinstance(leaves[0], BaseException):
        exc = leaves[0]  # an exception group (anyio's task groups; not a builtin on 3.10)
    if isinstance(exc, FileNotFoundError):
        return f"its command was not found ({exc.filename or exc})"
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
