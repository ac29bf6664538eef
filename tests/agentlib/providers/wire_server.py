"""A loopback HTTP/1.1 server that replays wire transcripts, cut at random byte boundaries,
and injects faults (error statuses, resets, truncation, stalls, a slow trickle).

It runs on the test's own event loop (``asyncio.start_server`` on 127.0.0.1, port 0), speaks
just enough HTTP for httpx, and records every request so tests can check what was sent.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import socket
import struct
from collections import deque
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Literal

Fault = Literal["reset", "truncate", "cut", "stall"]


@dataclass
class Reply:
    """One scripted response.

    ``fault`` happens after ``fault_at`` bytes of the body: ``reset`` aborts the TCP connection
    (RST), ``truncate`` ends the body properly at that point (so the *stream* lacks its end
    marker), ``cut`` closes the socket mid-body without the chunked terminator, ``stall`` sends
    nothing more until the client gives up.
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
    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.requests: list[Recorded] = []
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def queue(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

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
        try:
            head = await reader.readuntil(b"\r\n\r\n")
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
            await self._respond(writer, reply)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            self._tasks.discard(task)
            if not writer.is_closing():
                writer.close()

    async def _respond(self, writer: asyncio.StreamWriter, reply: Reply) -> None:
        reason = (
            HTTPStatus(reply.status).phrase if reply.status in HTTPStatus._value2member_map_ else "Status"
        )
        head = [f"HTTP/1.1 {reply.status} {reason}", f"Content-Type: {reply.content_type}"]
        head += [f"{k}: {v}" for k, v in reply.headers.items()]
        head += ["Transfer-Encoding: chunked", "Connection: close", "", ""]
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
            return
        if reply.fault == "cut":
            writer.transport.close()
            return
        if reply.fault == "stall":
            await asyncio.sleep(3600)
        writer.write(b"0\r\n\r\n")
        await writer.drain()


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
