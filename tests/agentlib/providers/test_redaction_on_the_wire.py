"""What actually goes over the wire has its secrets masked: a real OpenAI or Anthropic adapter
talks to the loopback server, and the request bodies it received hold no secret."""

from __future__ import annotations

from pathlib import Path

import pytest
from wire_server import Reply, WireServer
from wire_transcripts import ANTHROPIC_STREAM, OPENAI_TOOL_CALL, anthropic, chunk, sse

from ipyagent import Agent, tool

KEY = "sk-W1R3-d0n7-s3nd-7h15-k3y-0123456789"
GITHUB = "ghp_0123456789abcdefABCDEF0123456789abcd"

OPENAI_TEXT = sse(chunk({"content": "Done."}), chunk({}, "stop"))
ANTHROPIC_TEXT = anthropic(
    {"type": "message_start", "message": {"id": "m", "role": "assistant", "content": [], "usage": {}}},
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Done."}},
    {"type": "content_block_stop", "index": 0},
    {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}},
    {"type": "message_stop"},
)
CASES = {
    "openai": ("OPENAI_API_KEY", OPENAI_TOOL_CALL, OPENAI_TEXT),
    "anthropic": ("ANTHROPIC_API_KEY", ANTHROPIC_STREAM, ANTHROPIC_TEXT),
}


@tool(read_only=True)
def get_rate(cur: str = "EUR") -> str:
    """The exchange rate of a currency (what the Anthropic transcript calls)."""
    return f"1.08 (fetched with token {GITHUB})"


@tool(read_only=True)
def get_capital(country: str) -> str:
    """The capital of a country (what the OpenAI transcript calls)."""
    return f"London (fetched with token {GITHUB})"


@pytest.fixture
def configured(server: WireServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> WireServer:
    config = tmp_path / "config.toml"
    config.write_text(
        "".join(f'[endpoints.{name}]\nbase_url = "{server.base_url}"\n' for name in ("openai", "anthropic"))
    )
    monkeypatch.setenv("IPYAGENT_CONFIG", str(config))
    for key_env, *_ in CASES.values():
        monkeypatch.setenv(key_env, KEY)
    return server


@pytest.mark.parametrize("endpoint", list(CASES))
async def test_the_bodies_sent_hold_no_secret(configured: WireServer, endpoint: str) -> None:
    _, with_call, text = CASES[endpoint]
    configured.queue(Reply(with_call), Reply(text))
    agent = Agent(
        model=f"{endpoint}/some-model", tools=[get_rate, get_capital], system=f"Sign requests with {KEY}."
    )
    result = await agent.run(f"My key is {KEY}; what is the rate of get_rate(EUR)? ({GITHUB})")
    assert result.status == "completed", result.error
    bodies = [r.body.decode() for r in configured.requests]
    assert len(bodies) == 2
    for body in bodies:
        assert KEY not in body and GITHUB not in body
        assert "[redacted]" in body
    assert "(fetched with token [redacted])" in bodies[1]  # the tool's result, masked
    # The key did go where it belongs: in the request's credentials header.
    assert all(
        KEY in r.headers.get("authorization", "") + r.headers.get("x-api-key", "")
        for r in configured.requests
    )
    agent.close()
