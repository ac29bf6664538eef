"""ipyagent's stdio transport for MCP servers, in place of the SDK's ``stdio_client``.

Two things the SDK's transport does not do:

- **Bounded reads.** A server's messages are newline-delimited JSON-RPC. The SDK's reader adds
  each 64 KB chunk to the line read so far and splits it again (quadratic: a 20 MB result took
  27 s and 290 MB), and parses whatever arrives. Here a line is framed as bytes with a cap,
  ``max_result_bytes``: past the cap the rest of the line is read and dropped (only its first
  ``cap`` bytes and last few KB are kept), and the request it answers gets a result that says it
  was cut, with the beginning of its text (a ``tools/call``), or an error (anything else). A line
  that is not JSON-RPC costs one warning line per connection, not a traceback each.
- **No process left behind.** The server is started below a small launcher (:mod:`._launcher`)
  that ends every process below it, ``setsid`` daemons included, when the server exits, when it
  is told to stop, or when the kernel dies however it ends.

Shutdown is the MCP spec's (close stdin, wait, then terminate), bounded: stdin is closed, the
server gets :data:`_EOF_GRACE` seconds, then the launcher is sent SIGTERM and ends the tree.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import anyio
import anyio.abc

from .capped import cut_answer
from .config import DEFAULT_MAX_RESULT_BYTES

__all__ = ["StdioServer", "stdio_transport"]

logger = logging.getLogger("ipyagent.mcp")

LAUNCHER = Path(__file__).with_name("_launcher.py")
#: Seconds a server gets to exit after its stdin ends, before the launcher ends it.
_EOF_GRACE = 2.0
#: Seconds the launcher gets to end the server's processes (it SIGKILLs after 1 s).
_KILL_WAIT = 3.0
#: Bytes read from the server's stdout at once.
_CHUNK = 1 << 16
#: The end of an over-long line kept, to find the id of the response it is.
_TAIL = 4096
_ID_FIRST = re.compile(rb'^\s*\{\s*"jsonrpc"\s*:\s*"2\.0"\s*,\s*"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")')
_REQUEST_FIRST = re.compile(rb'^\s*\{\s*"jsonrpc"\s*:\s*"2\.0"\s*,\s*"method"')
_ID_LAST = re.compile(rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*\}\s*$')


@dataclass(frozen=True)
class StdioServer:
    """How to start one server: its command line, environment (in full), folder; and its cap."""

    name: str
    command: str
    args: tuple[str, ...]
    env: dict[str, str]
    cwd: str | None = None
    max_bytes: int = DEFAULT_MAX_RESULT_BYTES


@asynccontextmanager
async def stdio_transport(server: StdioServer, *, errlog: IO[str]) -> AsyncIterator[tuple[Any, Any]]:
    """Start ``server`` below the launcher; yield the (read, write) streams the SDK's client
    reads and writes. Leaving ends the server and everything it started."""
    from mcp.shared.message import SessionMessage

    process = await anyio.open_process(
        [sys.executable, "-I", "-S", str(LAUNCHER), str(os.getpid()), _executable(server), *server.args],
        env=server.env,
        stderr=errlog,
        cwd=server.cwd,
        start_new_session=True,  # a Ctrl-C in the kernel's terminal is not the server's
    )
    reader_in, read_stream = anyio.create_memory_object_stream[Any](0)
    write_stream, writer_out = anyio.create_memory_object_stream[SessionMessage](0)
    framing = _Framing(server)

    async def read() -> None:
        assert process.stdout is not None
        async with reader_in:
            with suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                while True:
                    for message in framing.feed(await process.stdout.receive(_CHUNK)):
                        await reader_in.send(message)

    async def write() -> None:
        assert process.stdin is not None
        try:
            async with writer_out:
                async for outgoing in writer_out:
                    framing.sent(outgoing.message)
                    data = outgoing.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                    await process.stdin.send(data.encode())
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await reader_in.aclose()  # the session sees the connection end, not a hung request

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(read)
        tasks.start_soon(write)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                await _stop(process)
                for stream in (read_stream, write_stream, reader_in, writer_out):
                    await stream.aclose()
            tasks.cancel_scope.cancel()


async def _stop(process: anyio.abc.Process) -> None:
    """Close stdin; after the grace, SIGTERM the launcher (it ends the tree); SIGKILL it last."""
    assert process.stdin is not None and process.stdout is not None
    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdin.aclose()
    for wait, sig in ((_EOF_GRACE, signal.SIGTERM), (_KILL_WAIT, signal.SIGKILL), (_KILL_WAIT, None)):
        with anyio.move_on_after(wait):
            await _exited(process)
            break
        if sig is not None:
            with suppress(ProcessLookupError):
                process.send_signal(sig)
    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdout.aclose()
    # The asyncio transport warns at GC while a pipe end is open; nothing public closes it.
    transport = getattr(getattr(process, "_process", None), "_transport", None)
    if callable(close := getattr(transport, "close", None)):
        with suppress(PermissionError):
            close()


def _executable(server: StdioServer) -> str:
    """The server's program, found on its PATH here: the launcher would only see it fail."""
    found = shutil.which(server.command, path=server.env.get("PATH"))
    if found is None:
        raise FileNotFoundError(2, "No such file or directory", server.command)
    return found


async def _exited(process: anyio.abc.Process) -> None:
    # Not process.wait(): it also waits for the pipes' end, which a survivor may hold.
    while process.returncode is None:  # noqa: ASYNC110 - nothing signals the exit but the poll
        await anyio.sleep(0.01)


class _Framing:
    """Newline-delimited JSON-RPC from bytes, with a cap on a message's size (see the module
    doc). Knows the requests sent and not answered yet, to answer the one a cut message was."""

    def __init__(self, server: StdioServer) -> None:
        self.server = server
        self.line = bytearray()
        self.tail = b""
        self.size = 0  # bytes of the line so far, the dropped ones included
        self.pending: dict[str, str] = {}  # request id (as JSON) -> method
        self.warned = False

    def sent(self, message: Any) -> None:
        method = getattr(message, "method", None)
        request_id = getattr(message, "id", None)
        if method is not None and request_id is not None:
            self.pending[json.dumps(request_id)] = method

    def feed(self, chunk: bytes) -> list[Any]:
        """The messages ``chunk`` completes. Linear in its size: only the capped part of a line
        is ever copied."""
        out: list[Any] = []
        start, cap = 0, self.server.max_bytes
        while start < len(chunk):
            end = chunk.find(b"\n", start)
            stop = len(chunk) if end < 0 else end
            piece = chunk[start:stop]
            room = cap - len(self.line)
            if room > 0:
                self.line += piece[:room]
            self.size += len(piece)
            if self.size > cap:
                self.tail = (self.tail + piece[-_TAIL:])[-_TAIL:]
            if end < 0:
                break
            message = self._message() if self.size <= cap else self._cut()
            if message is not None:
                out.append(message)
            self.line, self.tail, self.size = bytearray(), b"", 0
            start = end + 1
        return out

    def _message(self) -> Any:
        import mcp_types
        from mcp.shared.message import SessionMessage

        if not self.line.strip():
            return None
        try:
            message = mcp_types.jsonrpc_message_adapter.validate_json(bytes(self.line), by_name=False)
        except ValueError:
            self._warn(f"wrote a line that is not JSON-RPC on stdout ({bytes(self.line[:80])!r}); ignored")
            return None
        if getattr(message, "method", None) is None:  # a response: its request is answered
            self.pending.pop(json.dumps(getattr(message, "id", None)), None)
        return SessionMessage(message)

    def _cut(self) -> Any:
        """The answer to the request a too-long line was (None when it cannot be told)."""
        import mcp_types
        from mcp.shared.message import SessionMessage

        found = _ID_FIRST.search(self.line) or _ID_LAST.search(self.tail)
        key = found.group(1).decode() if found else None
        if key is None and len(self.pending) == 1 and not _REQUEST_FIRST.match(self.line):
            key = next(iter(self.pending))
        method = self.pending.pop(key, None) if key is not None else None
        what = f"{self.size:,} bytes, more than its limit of {self.server.max_bytes:,} (max_result_bytes)"
        if key is None or method is None:
            self._warn(f"sent a message of {what}; it was dropped")
            return None
        data = cut_answer(json.loads(key), method, bytes(self.line), what)
        return SessionMessage(mcp_types.jsonrpc_message_adapter.validate_python(data, by_name=False))

    def _warn(self, what: str) -> None:
        # One line per connection: a server that writes logs on stdout would flood otherwise.
        if not self.warned:
            self.warned = True
            logger.warning("The MCP server `%s` %s.", self.server.name, what)
