"""API keys never show: everything the adapters produce — reprs, events, errors (even when the
server echoes the key back), tracebacks and log records — is scanned for a fake key."""

from __future__ import annotations

import json
import logging
import traceback
from pathlib import Path
from typing import Any

import pytest
from wire_server import Reply, WireServer, collect
from wire_transcripts import ANTHROPIC_STREAM, OLLAMA_STREAM, OPENAI_TOOL_CALL, anthropic, chunk, ndjson, sse

from ipyagent.agentlib.endpoints import get_endpoint, provider_for
from ipyagent.agentlib.errors import AgentError
from ipyagent.agentlib.messages import Message
from ipyagent.agentlib.model import PROVIDER_EVENT_ADAPTER, ModelRequest

KEY = "sk-FAKE-d0n7-l3ak-7h15-k3y-0123456789"
ECHO = json.dumps(
    {"error": {"message": f"Incorrect API key provided: {KEY}", "type": "invalid_request_error"}}
).encode()

CASES: dict[str, tuple[str, bytes, str, bytes, bytes]] = {
    # endpoint: (key variable, good stream, content type, in-stream error echoing the key, bad chunk)
    "openai": ("OPENAI_API_KEY", OPENAI_TOOL_CALL, "text/event-stream",
               sse({"error": {"code": 500, "message": f"boom {KEY}"}}, done=False),
               sse(f"not json {KEY}")),
    "openrouter": ("OPENROUTER_API_KEY", OPENAI_TOOL_CALL, "text/event-stream",
                   sse(chunk({"content": "a"}), ("error", {"error": {"message": KEY}}), done=False),
                   sse(f"{{{KEY}")),
    "anthropic": ("ANTHROPIC_API_KEY", ANTHROPIC_STREAM, "text/event-stream",
                  anthropic({"type": "error", "error": {"type": "overloaded_error", "message": KEY}}),
                  f"event: ping\ndata: {KEY}\n\n".encode()),
    "ollama": ("OLLAMA_API_KEY", OLLAMA_STREAM, "application/x-ndjson",
               ndjson({"error": f"bad key {KEY}"}),
               f"{KEY}\n".encode()),
}  # fmt: skip


@pytest.fixture
def configured(server: WireServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> WireServer:
    config = tmp_path / "config.toml"
    config.write_text(
        "".join(
            f'[endpoints.{name}]\nbase_url = "{server.base_url}"\n'
            for name in ("openai", "openrouter", "anthropic", "ollama")
        )
    )
    monkeypatch.setenv("IPYAGENT_CONFIG", str(config))
    for key_env, *_ in CASES.values():
        monkeypatch.setenv(key_env, KEY)
    return server


def _texts_of_error(err: BaseException) -> list[str]:
    texts = [str(err), repr(err), "".join(traceback.format_exception(err))]
    if isinstance(err, AgentError):
        texts += [err.info.model_dump_json(), err.hint]
    return texts


@pytest.mark.parametrize("endpoint", list(CASES))
async def test_key_never_appears(
    configured: WireServer, endpoint: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)  # httpx and httpcore log requests at INFO and DEBUG
    _, good, content_type, in_stream_error, bad_chunk = CASES[endpoint]
    produced: list[str] = []
    provider = provider_for(f"{endpoint}/some-model")
    produced += [repr(provider), str(provider), repr(vars(provider)), repr(get_endpoint(endpoint))]
    request = ModelRequest(model="some-model", messages=[Message.user("hi")])

    configured.queue(Reply(good, content_type=content_type))
    events = await collect(provider.stream(request))
    produced += [PROVIDER_EVENT_ADAPTER.dump_json(e).decode() for e in events] + [repr(e) for e in events]

    configured.queue(
        Reply(ECHO, 401, content_type="application/json"),
        Reply(in_stream_error, content_type=content_type),
        Reply(bad_chunk, content_type=content_type),
    )
    for _ in range(3):
        with pytest.raises(AgentError) as info:
            await collect(provider.stream(request))
        produced += _texts_of_error(info.value)

    produced += [r.getMessage() for r in caplog.records] + [repr(r.args) for r in caplog.records]
    # The key did reach the server, so the scan above is meaningful.
    sent: list[Any] = [
        r.headers.get("authorization", "") + r.headers.get("x-api-key", "") for r in configured.requests
    ]
    assert all(KEY in header for header in sent)
    leaks = [text for text in produced if KEY in text]
    assert not leaks, leaks[:3]
    assert any("***" in text for text in produced)  # the echoed key was masked, not just absent
