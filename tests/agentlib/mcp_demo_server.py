"""A small MCP server for the tests, built on the official SDK.

    python mcp_demo_server.py              serves over stdio
    python mcp_demo_server.py http PORT    serves streamable HTTP on 127.0.0.1:PORT/mcp

With ``DEMO_REQUIRE_TOKEN`` set, the HTTP server answers only requests whose Authorization
header is ``Bearer <that token>``.
"""

from __future__ import annotations

import os
import sys
import time

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

server = MCPServer("demo")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
def wipe(path: str) -> str:
    """Delete a file (pretend)."""
    return f"wiped {path}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True, destructive_hint=True))
def purge(path: str) -> str:
    """Delete a file (pretend), hinted both read-only and destructive: destructive wins."""
    return f"purged {path}"


@server.tool()
def note(text: str) -> str:
    """Write a note (no hints: the client cannot know it is harmless)."""
    return f"noted {text}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def nap(seconds: float) -> str:
    """Sleep, then answer."""
    time.sleep(seconds)
    return "awake"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def die() -> str:
    """Exit the server process at once."""
    os._exit(3)


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def fail() -> str:
    """Raise: the server reports an error result."""
    raise ValueError("the demo tool failed on purpose")


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        if token := os.environ.get("DEMO_REQUIRE_TOKEN"):
            _serve_with_token(int(sys.argv[2]), token)
        else:
            server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()


def _serve_with_token(port: int, token: str) -> None:
    import uvicorn
    from starlette.responses import PlainTextResponse

    app = server.streamable_http_app()
    inner = app.middleware_stack or app.build_middleware_stack()

    async def guarded(scope, receive, send):  # type: ignore[no-untyped-def]
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            if headers.get(b"authorization") != f"Bearer {token}".encode():
                await PlainTextResponse("unauthorized", status_code=401)(scope, receive, send)
                return
        await inner(scope, receive, send)

    app.middleware_stack = guarded  # type: ignore[assignment]
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
