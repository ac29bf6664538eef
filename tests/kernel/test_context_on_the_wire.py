"""The notebook's context in the request body a real provider receives: a kernel runs
``%%agent`` against the OpenAI wire format served on loopback, and the bodies show the context
present by default, bounded by its token budget, limited to the parts asked for, and absent when
turned off — with variables' names and types, never their values."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Kernel, text_of

sys.path.insert(0, str(Path(__file__).parents[1] / "agentlib" / "providers"))
from wire_server import Reply, WireServer
from wire_transcripts import chunk, sse

ANSWER = sse(chunk({"role": "assistant", "content": "Noted."}), chunk({}, "stop"))


@pytest.fixture
def server() -> Iterator[WireServer]:
    """The wire server on a loop of its own: the kernel is another process calling it."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    srv = WireServer()
    asyncio.run_coroutine_threadsafe(srv.start(), loop).result(10)
    yield srv
    asyncio.run_coroutine_threadsafe(srv.stop(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()


def last_user_text(body: dict[str, Any]) -> str:
    content = body["messages"][-1]["content"]
    return content if isinstance(content, str) else "\n".join(p.get("text", "") for p in content)


def test_the_context_reaches_the_provider_bounded_and_as_configured(
    kernel: Kernel, server: WireServer
) -> None:
    server.queue(*(Reply(ANSWER) for _ in range(4)))
    reply, _ = kernel.run(
        "%load_ext ipyagent\n"
        "from ipyagent.agentlib.providers.openai import OpenAIProvider\n"
        f"m = OpenAIProvider('gpt-4.1', base_url='{server.base_url}/v1/', api_key='sk-test-1', "
        "endpoint='openai')\n"
        "api_password = 'hunter2-do-not-send'\n"
        "for i in range(1000):\n    globals()[f'column_{i:04}'] = [i] * 3\n"
    )
    assert reply["status"] == "ok", reply
    kernel.run("1 / 0")

    reply, outputs = kernel.run("%%agent -m m\nWhat failed?")
    assert reply["status"] == "ok", text_of(outputs)
    sent = last_user_text(server.requests[0].json)
    assert sent.startswith("What failed?")
    assert "<notebook-context>" in sent and "ZeroDivisionError" in sent
    assert "api_password: str" in sent and "hunter2" not in sent  # names and types, never values
    # 1,001 variables do not fit: the default budget (1,000 tokens) trims them.
    assert "column_0000" in sent and "column_0999" not in sent
    assert len(sent) < 6_000

    kernel.run("%config AgentMagics.context_budget = 200")
    kernel.run("%%agent -m m\nAnd now?")
    smaller = last_user_text(server.requests[1].json)
    assert "<notebook-context>" in smaller and len(smaller) < len(sent) / 2

    kernel.run("%%agent -m m --context error\nOnly the error.")
    only_error = last_user_text(server.requests[2].json)
    assert "ZeroDivisionError" in only_error and "api_password" not in only_error

    kernel.run("%%agent -m m --context none\nNothing else.")
    bare = server.requests[3].json["messages"][-1]
    assert "notebook-context" not in json.dumps(bare)
    assert last_user_text({"messages": [bare]}) == "Nothing else."
