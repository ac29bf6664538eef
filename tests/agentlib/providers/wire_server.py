"""A loopback HTTP/1.1 server that replays wire transcripts, cut at random byte boundaries,
and injects faults (error statuses, resets, truncation, stalls, a slow trickle).

It runs on the test's own event loop (``asyncio.start_server`` on 127.0.0.1, port 0), speaks
just enough HTTP for httpx, and records every request so tests can check what was sent. By
default it closes each connection after one response; ``WireServer(keep_alive=True)`` serves
requests on a connection until the client closes it, and counts the connections it accepted and
the ones the client closed.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import socket
import struct
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Literal

Fault = Literal["reset", "truncate", "cut", "stall", "drop"]


@dataclass
class Reply:
    """One scripted response.

    ``fault`` happens after ``fault_at`` bytes of the body: ``reset`` aborts the TCP connection
    (RST), ``truncate`` ends the body properly at that point (so the *stream* lacks its end
    marker), ``cut`` closes the socket mid-body without the chunked terminator, ``stall`` sends
    nothing more until the client gives up, ``drop`` closes the connection after reading the
    request, before any response (a kept-alive connection the server gave up on).
    """

    body: bytes = b""
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "text/event-stream"
    pieces: int = 12  # the body is cut at pieces-1 random byte positions
    delay: float = 0.0  # seconds between pieces: a slow trickle
    fault: Fault | None = None
    fault_at: int = 0
    seed: int = 0


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)


class WireServer:
    def __init__(self, *, keep_alive: bool = False) -> None:
        self.keep_alive = keep_alive
        self.replies: deque[Reply] = deque()
        self.requests: list[Recorded] = []
        #: Connections accepted, and those the client closed (EOF between requests).
        self.connections = 0
        self.client_closed = 0
        self.changed = asyncio.Event()  # set whenever one of the counts changes
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def queue(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    async def start(self, port: int = 0) -> None:
        """Listen on ``port`` (0: any free one); after :meth:`stop`, ``start(server.port)``
        restarts the server where the client expects it."""
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def wait_for(self, condition: Callable[[], bool], timeout: float = 10.0) -> None:
        """Wait until ``condition()`` holds (checked whenever a count changes); a hang fails."""

        async def wait() -> None:
            while not condition():
                self.changed.clear()
                await self.changed.wait()

        await asyncio.wait_for(wait(), timeout)

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._count("connections")
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError as exc:
                    if not exc.partial:
                        self._count("client_closed")
                    raise
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        name, _, value = line.partition(":")
                        headers[name.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                self.requests.append(Recorded(method, path, headers, body))
                reply = self.replies.popleft() if self.replies else Reply(b'{"error":"no reply queued"}', 500)
                if reply.fault == "drop" or not await self._respond(writer, reply):
                    break
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            self._tasks.discard(task)
            if not writer.is_closing():
                writer.close()

    def _count(self, name: str) -> None:
        setattr(self, name, getattr(self, name) + 1)
        self.changed.set()

    async def _respond(self, writer: asyncio.StreamWriter, reply: Reply) -> bool:
        """Send ``reply``; whether the connection may serve another request."""
        reason = (
            HTTPStatus(reply.status).phrase if reply.status in HTTPStatus._value2member_map_ else "Status"
        )
        head = [f"HTTP/1.1 {reply.status} {reason}", f"Content-Type: {reply.content_type}"]
        head += [f"{k}: {v}" for k, v in reply.headers.items()]
        keep = self.keep_alive and reply.fault is None
        head += ["Transfer-Encoding: chunked", "Connection: " + ("keep-alive" if keep else "close"), "", ""]
        writer.write("\r\n".join(head).encode("latin-1"))
        await writer.drain()

        body = reply.body if reply.fault is None else reply.body[: reply.fault_at]
        for piece in cut(body, reply.pieces, reply.seed):
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            await writer.drain()
            await asyncio.sleep(reply.delay)
        if reply.fault == "reset":
            sock = writer.get_extra_info("socket")
            # SO_LINGER with a zero timeout makes close() send RST instead of FIN.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
            return False
        if reply.fault == "cut":
            writer.transport.close()
            return False
        if reply.fault == "stall":
            await asyncio.sleep(3600)
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return keep


def cut(data: bytes, pieces: int, seed: int) -> list[bytes]:
    """``data`` split at ``pieces - 1`` random positions (some pieces may be empty-free)."""
    if not data:
        return []
    rng = random.Random(seed)
    points = sorted(rng.sample(range(1, len(data)), min(max(pieces - 1, 0), len(data) - 1)))
    bounds = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds) if b > a]


async def collect(stream: Any, timeout: float = 10.0) -> list[Any]:
    """Every event of an adapter's stream; a hang fails the test instead of blocking it."""
    events: list[Any] = []

    async def run() -> None:
        async for event in stream:
            events.append(event)

    await asyncio.wait_for(run(), timeout)
    return events
