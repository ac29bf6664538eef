"""The HTTP adapters' clients: one ``httpx.AsyncClient`` per endpoint and event loop, kept
between requests, so the turns of a conversation reuse one connection instead of paying a new
TCP and TLS handshake each.

An ``AsyncClient`` belongs to the event loop it first ran on (its connections are that loop's
transports), so clients are kept per loop: the kernel's background loop keeps its clients for the
kernel's life, while each ``asyncio.run`` (as in ``Agent.run_sync``) gets its own and closes them
as it ends; no client is ever used on a second loop. On one loop, every provider of an endpoint
shares that endpoint's client (two agents on ``openai`` share its connections). A client is also
keyed by the environment variables httpx reads when it builds one (proxies, CA bundle), so
setting them in a running kernel counts from the next request. A client holds no key: the
adapters send headers with each request.

A client is closed:

- when its loop shuts down: the pool starts an async generator on each loop it serves, and
  ``loop.shutdown_asyncgens()`` (called by ``asyncio.run``, ``asyncio.Runner``, pytest-asyncio
  and :class:`~ipyagent.agentlib.background.BackgroundLoop` when it stops) closes it, and with it
  the loop's clients;
- when the providers that used it have let go (:func:`release`, which ``HTTPProvider.close`` and
  so ``Agent.close`` call) and its last request in flight has ended. A client used without a
  holder stays until its loop shuts down.

This module does not send requests or map errors (that is :mod:`._http`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import weakref
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field

import httpx

__all__ = ["DEFAULT_TIMEOUT", "LIMITS", "lease", "release"]

# Reasoning models may think for minutes before their first streamed byte (OpenAI's o-series
# streams no reasoning), so the read timeout is generous; connecting should be quick.
DEFAULT_TIMEOUT = httpx.Timeout(300.0, connect=15.0)

# httpx drops an idle connection after 5 s by default, shorter than a tool call or a user reading
# a reply, so turn 2 would often handshake again. Hosted APIs keep idle connections for about a
# minute; one the server closed sooner is noticed before use (it reads as EOF) or, in a race, sent
# again by ``_http`` on a new connection.
LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=20, keepalive_expiry=60.0)

_log = logging.getLogger(__name__)


@dataclass(eq=False)
class _Client:
    http: httpx.AsyncClient
    holders: weakref.WeakSet[object] = field(default_factory=weakref.WeakSet)
    active: int = 0  # requests in flight
    released: bool = False  # a holder let go: close once no holder and no request is left

    @property
    def orphaned(self) -> bool:
        return self.released and not self.holders and not self.active


@dataclass(eq=False)
class _LoopClients:
    loop: asyncio.AbstractEventLoop
    clients: dict[tuple[str, int], _Client] = field(default_factory=dict)
    #: Clients taken out of ``clients`` whose closing has not finished yet.
    closing: set[httpx.AsyncClient] = field(default_factory=set)
    tasks: set[asyncio.Task[None]] = field(default_factory=set)
    closer: AsyncGenerator[None, None] | None = None


# Leases happen on each loop's thread, releases on any thread.
_lock = threading.Lock()
_loops: dict[asyncio.AbstractEventLoop, _LoopClients] = {}


@contextlib.asynccontextmanager
async def lease(endpoint: str, *, holder: object | None = None) -> AsyncIterator[httpx.AsyncClient]:
    """The client of ``endpoint`` on the running loop, for one request. ``holder`` (the provider)
    keeps the client open until it is :func:`release`\\ d."""
    loop = asyncio.get_running_loop()
    key = (endpoint, _environment())
    with _lock:
        state = _loops.get(loop)
        fresh = state is None
        if state is None:
            for closed in [other for other in _loops if other.is_closed()]:
                # Closed without shutting down its async generators: nothing can close its clients now.
                del _loops[closed]
            state = _loops[loop] = _LoopClients(loop)
        entry = state.clients.get(key)
        if entry is None:
            entry = state.clients[key] = _Client(httpx.AsyncClient(timeout=DEFAULT_TIMEOUT, limits=LIMITS))
        if holder is not None:
            entry.holders.add(holder)
        entry.active += 1
    if fresh:
        await _watch(state)
    try:
        yield entry.http
    finally:
        with _lock:
            entry.active -= 1
            orphaned = entry.orphaned and state.clients.get(key) is entry
            if orphaned:
                del state.clients[key]
        if orphaned:
            await entry.http.aclose()


def release(holder: object) -> None:
    """Let go of every client ``holder`` used; a client left with no holder is closed once its
    requests in flight end. Safe from any thread; a loop that is not running closes its clients
    when it shuts down."""
    touched: list[_LoopClients] = []
    with _lock:
        for state in _loops.values():
            for entry in state.clients.values():
                if holder in entry.holders:
                    entry.holders.discard(holder)
                    entry.released = True
                    if state not in touched:
                        touched.append(state)
    for state in touched:
        loop = state.loop
        if _running_loop() is loop:
            _close_orphans(state)
        elif loop.is_running():
            with contextlib.suppress(RuntimeError):  # it closed in the meantime, and its clients with it
                loop.call_soon_threadsafe(_close_orphans, state)


def _close_orphans(state: _LoopClients) -> None:
    """On the loop's thread: start closing the clients no one holds or uses."""
    with _lock:
        doomed = [entry.http for entry in state.clients.values() if entry.orphaned]
        state.clients = {key: entry for key, entry in state.clients.items() if not entry.orphaned}
        state.closing.update(doomed)
    for http in doomed:
        task = state.loop.create_task(_aclose(state, http))
        state.tasks.add(task)
        task.add_done_callback(state.tasks.discard)


async def _aclose(state: _LoopClients, http: httpx.AsyncClient) -> None:
    try:
        await http.aclose()
    except Exception:  # closing sockets should not fail; if one does, the others still close
        _log.debug("closing an HTTP client failed", exc_info=True)
    state.closing.discard(http)


async def _watch(state: _LoopClients) -> None:
    """Start an async generator that the loop closes at shutdown, closing the loop's clients.

    ``loop.shutdown_asyncgens()`` is the one hook asyncio gives code that does not own the loop:
    the loop records every async generator that starts on it (a weak set, so the generator is
    kept alive by ``_loops``) and closes those still open."""
    state.closer = _closer(state)
    await anext(state.closer)


async def _closer(state: _LoopClients) -> AsyncGenerator[None, None]:
    try:
        yield
    finally:
        with _lock:
            if _loops.get(state.loop) is state:
                del _loops[state.loop]
            clients = [entry.http for entry in state.clients.values()] + list(state.closing)
            state.clients.clear()
        for http in clients:  # closing twice (a task was already at it) is harmless
            await _aclose(state, http)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _environment() -> int:
    """What httpx reads from the environment when it builds a client: proxies and CA bundle.
    Only a hash is kept (a proxy URL may hold a password)."""
    return hash(
        tuple(
            sorted(
                (name, value)
                for name, value in os.environ.items()
                if name.lower().endswith("_proxy") or name in ("SSL_CERT_FILE", "SSL_CERT_DIR")
            )
        )
    )
