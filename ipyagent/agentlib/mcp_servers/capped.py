"""What a server's answer becomes when it is over ``max_result_bytes``, and the cap for
streamable-HTTP servers.

:func:`cut_answer` is the JSON-RPC answer that stands in for a cut one, whichever transport read
it: a ``tools/call`` gets a result that says it was cut, with the beginning of its first text (an
error result, so a tool with an output schema is not held to it); any other request an error.

:class:`CappedTransport` wraps the HTTP client's transport: a JSON answer to a request is read
up to the cap, and past it the connection is closed (the rest is never downloaded) and the
answer replaced by :func:`cut_answer`'s. An answer streamed as server-sent events is capped by
the SDK itself, per event (``max_sse_event_size``), as an error.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import suppress
from typing import Any

import httpx2

__all__ = ["CappedTransport", "cut_answer"]

_TEXT = re.compile(rb'"text"\s*:\s*"')
_CLOSING_QUOTE = re.compile(r'(?<!\\)(?:\\\\)*"')


def cut_answer(request_id: Any, method: str, head: bytes, what: str) -> dict[str, Any]:
    """The JSON-RPC answer to ``method`` (request ``request_id``) whose real one was ``what``
    (its size, said to the model) and began with ``head``."""
    if method != "tools/call":
        message = f"The MCP server's answer to {method} was {what}."
        return {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32603, "message": message}}
    note = (
        f"[The server's answer was {what}. It was cut while it was read: the text below is its "
        "beginning, and the rest was not kept. Ask the tool for less (a narrower query, a page of "
        "the data), or ask the user to raise max_result_bytes for this server.]"
    )
    text = _leading_text(head)
    content = [{"type": "text", "text": f"{note}\n{text}" if text else note}]
    return {"jsonrpc": "2.0", "id": request_id, "result": {"content": content, "isError": True}}


def _leading_text(head: bytes) -> str:
    """The first text content of a result cut at ``head``'s end, as far as it goes."""
    found = _TEXT.search(head)
    if found is None:
        return ""
    body = head[found.end() :].decode("utf-8", errors="ignore")
    closing = _CLOSING_QUOTE.search(body)  # the string may end before the cut
    if closing is not None:
        body = body[: closing.end() - 1]
    for trim in range(7):  # an escape (\n, \uXXXX) the cut split in two
        with suppress(ValueError):
            text: str = json.loads(f'"{body[: len(body) - trim]}"')
            return text
    return ""


class CappedTransport(httpx2.AsyncBaseTransport):
    """``inner`` with each JSON answer to a JSON-RPC request cut at ``max_bytes``."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, max_bytes: int) -> None:
        self.inner = inner
        self.max_bytes = max_bytes

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self.inner.handle_async_request(request)
        kind = response.headers.get("content-type", "").lower()
        if request.method != "POST" or not kind.startswith("application/json"):
            return response
        try:
            sent = json.loads(request.content)
        except (ValueError, httpx2.RequestNotRead):
            return response
        if not isinstance(sent, dict) or "method" not in sent or sent.get("id") is None:
            return response  # a notification, or a batch: nothing to answer in its place
        headers = [(k, v) for k, v in response.headers.multi_items() if k.lower() != "content-length"]
        stream = _CappedBody(response.stream, self.max_bytes, sent["id"], str(sent["method"]))
        return httpx2.Response(
            response.status_code,
            headers=headers,
            stream=stream,
            extensions=response.extensions,
            request=request,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


class _CappedBody(httpx2.AsyncByteStream):
    def __init__(self, inner: Any, max_bytes: int, request_id: Any, method: str) -> None:
        self.inner, self.max_bytes, self.request_id, self.method = inner, max_bytes, request_id, method

    async def __aiter__(self) -> AsyncIterator[bytes]:
        head = bytearray()
        async for chunk in self.inner:
            head += chunk
            if len(head) > self.max_bytes:
                await self.inner.aclose()  # the rest is not downloaded
                what = f"more than its limit of {self.max_bytes:,} bytes (max_result_bytes)"
                answer = cut_answer(self.request_id, self.method, bytes(head[: self.max_bytes]), what)
                yield json.dumps(answer).encode()
                return
        yield bytes(head)

    async def aclose(self) -> None:
        await self.inner.aclose()
