"""The hosted providers a notebook user reaches for first (Gemini, Mistral, xAI, Fireworks,
Cerebras, Hugging Face): their keys, the default model a key picks, and each one's departures
from OpenAI's wire format, checked in the bodies a loopback server received."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from wire_server import Reply, WireServer, collect
from wire_transcripts import chunk, sse

from ipyagent.agentlib.agent import Agent
from ipyagent.agentlib.endpoints import (
    DEFAULT_BY_KEY,
    UTILITY_BY_ENDPOINT,
    context_limit,
    default_model_id,
    get_endpoint,
    provider_for,
    register_endpoint,
)
from ipyagent.agentlib.errors import UserError
from ipyagent.agentlib.messages import Message
from ipyagent.agentlib.model import ModelRequest, ModelSettings, ToolSpec
from ipyagent.agentlib.prices import price_for

KEY = "AIzaSy-test-0123456789abcdef"
TOOLS = [ToolSpec(name="get_time", description="The time.", parameters={"type": "object", "properties": {}})]


def point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: WireServer, *names: str) -> None:
    """Send the named built-in endpoints to the loopback server, as a user's config file would."""
    config = tmp_path / "config.toml"
    config.write_text("".join(f'[endpoints.{n}]\nbase_url = "{server.base_url}/v1"\n' for n in names))
    monkeypatch.setenv("IPYAGENT_CONFIG", str(config))


def test_gemini_takes_either_google_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(UserError) as info:
        provider_for("gemini/gemini-2.5-flash")
    assert info.value.code == "missing_api_key"
    assert "GEMINI_API_KEY or GOOGLE_API_KEY" in str(info.value) and "GOOGLE_API_KEY" in info.value.hint
    monkeypatch.setenv("GOOGLE_API_KEY", KEY)
    assert get_endpoint("gemini").resolved_key() == KEY
    monkeypatch.setenv("GEMINI_API_KEY", "gemini-first-0123456789")
    assert get_endpoint("gemini").resolved_key() == "gemini-first-0123456789"  # tried first
    assert get_endpoint("gemini").key_source() == "GEMINI_API_KEY"


def test_only_google_api_key_picks_gemini(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", KEY)
    assert default_model_id() == "gemini/gemini-2.5-flash"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-abcdefgh")
    assert default_model_id() == "openai/gpt-4.1"  # the documented order: OpenAI's before Google's


@pytest.mark.parametrize(("env", "model"), DEFAULT_BY_KEY)
def test_each_key_picks_a_model_its_endpoint_serves(
    monkeypatch: pytest.MonkeyPatch, env: str, model: str
) -> None:
    monkeypatch.setenv(env, "k-test-0123456789")
    assert default_model_id() == model
    provider = provider_for(model)  # the key found is the one the endpoint reads
    assert provider.model_id == model


def test_default_and_utility_models_have_windows_and_prices() -> None:
    """What a key picks and what side calls use are known models: their context window (for
    compaction) and price (for costs and cost caps). The Hugging Face router has no price of its
    own: it bills what the provider serving the model charges."""
    models = {model for _, model in DEFAULT_BY_KEY}
    models |= {f"{endpoint}/{small}" for endpoint, small in UTILITY_BY_ENDPOINT.items()}
    for model in sorted(models):
        assert context_limit(model), model
        assert (price_for(model) is None) is model.startswith("huggingface/"), model


async def test_colab_with_google_api_key_and_no_config(
    server: WireServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No model named anywhere and only GOOGLE_API_KEY set: the agent runs on Gemini, the key
    sent as a Bearer token and the default model named on the wire."""
    point(tmp_path, monkeypatch, server, "gemini")
    monkeypatch.setenv("GOOGLE_API_KEY", KEY)
    server.queue(Reply(sse(chunk({"content": "Hello from Gemini"}), chunk({}, "stop"))))
    result = await Agent(mcp=False).run("hi")
    assert result.status == "completed" and result.text == "Hello from Gemini"
    sent = server.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.json["model"] == "gemini-2.5-flash"
    assert sent.json["stream_options"] == {"include_usage": True}


async def body_for(server: WireServer, model_id: str, request: ModelRequest) -> dict[str, Any]:
    server.queue(Reply(sse(chunk({"content": "ok"}), chunk({}, "stop"))))
    await collect(provider_for(model_id).stream(request))
    body: dict[str, Any] = server.requests[-1].json
    return body


def asking(choice: Any = "required") -> ModelRequest:
    settings = ModelSettings(thinking="high", max_tokens=500)
    return ModelRequest(
        model="m", messages=[Message.user("hi")], tools=TOOLS, tool_choice=choice, settings=settings
    )


@pytest.mark.parametrize(
    ("endpoint", "env", "required", "limit_field", "effort", "usage"),
    [
        ("gemini", "GEMINI_API_KEY", "required", "max_tokens", "high", True),
        # Mistral: 422 for stream_options and reasoning_effort; "any" is its "required".
        ("mistral", "MISTRAL_API_KEY", "any", "max_tokens", None, False),
        ("xai", "XAI_API_KEY", "required", "max_completion_tokens", None, True),
        ("fireworks", "FIREWORKS_API_KEY", "required", "max_tokens", None, True),
        ("cerebras", "CEREBRAS_API_KEY", "required", "max_completion_tokens", "high", True),
        ("huggingface", "HF_TOKEN", "required", "max_tokens", None, True),
    ],
)
async def test_each_endpoints_dialect_on_the_wire(
    server: WireServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    endpoint: str,
    env: str,
    required: str,
    limit_field: str,
    effort: str | None,
    usage: bool,
) -> None:
    point(tmp_path, monkeypatch, server, endpoint)
    monkeypatch.setenv(env, "k-test-0123456789")
    body = await body_for(server, f"{endpoint}/some-model", asking())
    assert body["tool_choice"] == required
    assert body[limit_field] == 500 and {"max_tokens", "max_completion_tokens"} - {limit_field} - set(body)
    assert body.get("reasoning_effort") == effort
    assert ("stream_options" in body) is usage
    assert server.requests[-1].headers["authorization"] == "Bearer k-test-0123456789"
    several = await body_for(server, f"{endpoint}/some-model", asking(("get_time",) * 1))
    assert several["tool_choice"] == {"type": "function", "function": {"name": "get_time"}}


async def test_dialect_fields_from_the_config_file(
    server: WireServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        f"""
[endpoints.lechat]
kind = "openai"
base_url = "{server.base_url}/v1"
api_key_env = ["LECHAT_KEY", "MISTRAL_API_KEY"]
tool_choice_required = "any"
stream_usage = false
"""
    )
    monkeypatch.setenv("IPYAGENT_CONFIG", str(config))
    with pytest.raises(UserError, match="LECHAT_KEY or MISTRAL_API_KEY"):
        provider_for("lechat/m")
    monkeypatch.setenv("MISTRAL_API_KEY", "k-mistral-0123456789")
    body = await body_for(server, "lechat/m", asking())
    assert body["tool_choice"] == "any" and "stream_options" not in body
    assert server.requests[-1].headers["authorization"] == "Bearer k-mistral-0123456789"
    config.write_text('[endpoints.bad]\nkind = "openai"\napi_key_env = []\n')
    with pytest.raises(UserError, match="api_key_env") as info:
        provider_for("bad/m")
    assert info.value.code == "invalid_config"


async def test_register_endpoint_with_two_key_variables(
    server: WireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    register_endpoint("team", base_url=server.base_url + "/v1", key_env=("TEAM_KEY", "TEAM_FALLBACK_KEY"))
    with pytest.raises(UserError, match="TEAM_KEY or TEAM_FALLBACK_KEY"):
        provider_for("team/m")
    monkeypatch.setenv("TEAM_FALLBACK_KEY", "k-team-0123456789")
    await body_for(server, "team/m", asking("auto"))
    assert server.requests[-1].headers["authorization"] == "Bearer k-team-0123456789"
