"""Endpoints: model-id resolution, built-ins and their env vars, config file, code, context limits."""

from __future__ import annotations

from pathlib import Path

import pytest
from wire_server import Reply, WireServer, collect
from wire_transcripts import OLLAMA_STREAM, chunk, sse

from ipyagent.agentlib import endpoints
from ipyagent.agentlib.endpoints import (
    context_limit,
    get_endpoint,
    provider_for,
    register_endpoint,
    split_model_id,
)
from ipyagent.agentlib.errors import UserError
from ipyagent.agentlib.messages import Message
from ipyagent.agentlib.model import ModelRequest, Provider
from ipyagent.agentlib.providers.anthropic import AnthropicProvider
from ipyagent.agentlib.providers.ollama import OllamaProvider
from ipyagent.agentlib.providers.openai import OpenAIProvider

REQUEST = ModelRequest(model="x", messages=[Message.user("hi")])


def test_model_ids_keep_slashes_in_the_model() -> None:
    assert split_model_id("openrouter/meta-llama/llama-3-8b") == ("openrouter", "meta-llama/llama-3-8b")
    for bad in ("gpt-4.1", "/gpt", "openai/", ""):
        with pytest.raises(UserError, match="<endpoint>/<model>"):
            split_model_id(bad)


@pytest.mark.parametrize(
    ("model_id", "cls", "key_env", "url"),
    [
        ("openai/gpt-4.1", OpenAIProvider, "OPENAI_API_KEY", "https://api.openai.com/v1"),
        ("anthropic/claude-sonnet-4-5", AnthropicProvider, "ANTHROPIC_API_KEY", "https://api.anthropic.com"),
        (
            "openrouter/meta-llama/llama-3-8b",
            OpenAIProvider,
            "OPENROUTER_API_KEY",
            "https://openrouter.ai/api/v1",
        ),
        ("groq/llama-3.3-70b", OpenAIProvider, "GROQ_API_KEY", "https://api.groq.com/openai/v1"),
        ("together/Qwen/Qwen3", OpenAIProvider, "TOGETHER_API_KEY", "https://api.together.xyz/v1"),
        ("deepseek/deepseek-chat", OpenAIProvider, "DEEPSEEK_API_KEY", "https://api.deepseek.com"),
        (
            "gemini/gemini-2.5-flash",
            OpenAIProvider,
            "GEMINI_API_KEY",
            "https://generativelanguage.googleapis.com/v1beta/openai",
        ),
        ("mistral/mistral-small-latest", OpenAIProvider, "MISTRAL_API_KEY", "https://api.mistral.ai/v1"),
        ("xai/grok-4", OpenAIProvider, "XAI_API_KEY", "https://api.x.ai/v1"),
        (
            "fireworks/accounts/fireworks/models/gpt-oss-120b",
            OpenAIProvider,
            "FIREWORKS_API_KEY",
            "https://api.fireworks.ai/inference/v1",
        ),
        ("cerebras/gpt-oss-120b", OpenAIProvider, "CEREBRAS_API_KEY", "https://api.cerebras.ai/v1"),
        ("huggingface/openai/gpt-oss-120b", OpenAIProvider, "HF_TOKEN", "https://router.huggingface.co/v1"),
    ],
)
def test_builtins(monkeypatch: pytest.MonkeyPatch, model_id: str, cls: type, key_env: str, url: str) -> None:
    with pytest.raises(UserError) as info:
        provider_for(model_id)
    assert info.value.code == "missing_api_key"
    assert key_env in str(info.value) and key_env in info.value.hint
    monkeypatch.setenv(key_env, "sk-test-abcdefgh")
    provider = provider_for(model_id)
    assert isinstance(provider, cls) and isinstance(provider, Provider)
    assert provider.model_id == model_id and provider.base_url == url


def test_missing_key_fails_before_any_request(server: WireServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    with pytest.raises(UserError, match="OPENAI_API_KEY"):
        provider_for("openai/gpt-4.1")
    assert server.requests == []


def test_base_url_env_vars(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "k" * 10)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:8000/v1/")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k" * 10)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "https://proxy.example/anthropic")
    assert provider_for("openai/m").base_url == "http://localhost:8000/v1"  # type: ignore[attr-defined]
    assert provider_for("anthropic/m").base_url == "https://proxy.example/anthropic"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("host", "url"),
    [
        (None, "http://127.0.0.1:11434"),
        ("0.0.0.0", "http://127.0.0.1:11434"),
        ("0.0.0.0:9999", "http://127.0.0.1:9999"),
        ("example.com", "http://example.com:11434"),
        ("https://ollama.example.com", "https://ollama.example.com:443"),
        ("http://box:1234/", "http://box:1234"),
    ],
)
def test_ollama_host(monkeypatch: pytest.MonkeyPatch, host: str | None, url: str) -> None:
    if host is not None:
        monkeypatch.setenv("OLLAMA_HOST", host)
    provider = provider_for("ollama/qwen3:8b")  # no key needed
    assert isinstance(provider, OllamaProvider) and provider.base_url == url


async def test_ollama_through_env(server: WireServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLLAMA_HOST", server.base_url)
    server.queue(Reply(OLLAMA_STREAM, content_type="application/x-ndjson"))
    # The loop may pass the qualified id; the wire gets the bare model name.
    await collect(provider_for("ollama/qwen3").stream(ModelRequest(model="ollama/qwen3", messages=[])))
    assert server.requests[0].json["model"] == "qwen3"


def test_unknown_endpoint_lists_known_ones() -> None:
    with pytest.raises(UserError) as info:
        provider_for("nope/model")
    assert info.value.code == "unknown_endpoint" and "openai" in info.value.hint


def test_a_kind_without_its_provider_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(endpoints._FACTORIES, "local", raising=False)
    register_endpoint("local", kind="local")
    with pytest.raises(UserError, match="not installed"):
        provider_for("local/qwen2.5-coder-0.5b")


async def test_register_endpoint_in_code(server: WireServer, monkeypatch: pytest.MonkeyPatch) -> None:
    endpoint = register_endpoint(
        "vllm",
        base_url=server.base_url + "/v1",
        key_env="VLLM_KEY",
        headers={"X-Team": "ml"},
        context_limits={"my/model": 4096},
    )
    assert endpoint.key_required
    with pytest.raises(UserError, match="VLLM_KEY"):
        provider_for("vllm/my/model")
    monkeypatch.setenv("VLLM_KEY", "sk-vllm-12345678")
    provider = provider_for("vllm/my/model")
    assert provider.context_limit == 4096
    server.queue(Reply(sse(chunk({"content": "ok"}), chunk({}, "stop"))))
    await collect(provider.stream(ModelRequest(model="my/model", messages=[Message.user("hi")])))
    sent = server.requests[0]
    assert sent.json["model"] == "my/model" and sent.headers["x-team"] == "ml"
    assert sent.headers["authorization"] == "Bearer sk-vllm-12345678"
    with pytest.raises(UserError, match="Invalid endpoint name"):
        register_endpoint("a/b")


def test_config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        """
[endpoints.lmstudio]
kind = "openai"
base_url = "http://localhost:1234/v1"
reasoning_field = "reasoning_text"
context_limits = { "qwen3-8b" = 32768 }

[endpoints.corp]
kind = "anthropic"
base_url = "https://llm.corp.example"
api_key_env = "CORP_KEY"
headers = { "X-Team" = "research" }

[endpoints.openai]
base_url = "https://proxy.example/v1"
"""
    )
    monkeypatch.setenv("IPYAGENT_CONFIG", str(config))
    monkeypatch.setenv("OPENAI_BASE_URL", "http://ignored")  # an explicit base_url wins
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-abcdefgh")
    lm = provider_for("lmstudio/qwen3-8b")
    assert isinstance(lm, OpenAIProvider) and lm.base_url == "http://localhost:1234/v1"
    assert lm.dialect.reasoning_field == "reasoning_text" and lm.context_limit == 32768
    with pytest.raises(UserError, match="CORP_KEY"):
        provider_for("corp/claude-x")
    assert get_endpoint("corp").headers == {"X-Team": "research"}
    assert provider_for("openai/gpt-4.1").base_url == "https://proxy.example/v1"  # type: ignore[attr-defined]
    # Code beats the config file.
    register_endpoint("lmstudio", base_url="http://other:1/v1")
    assert provider_for("lmstudio/x").base_url == "http://other:1/v1"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("[endpoints.x]\nkind = 'openai'\nbase_ulr = 'typo'\n", "unknown keys: base_ulr"),
        ("[endpoints.x]\nbase_url = 'http://a'\n", "needs kind"),
        ("[endpoints.x]\nkind = 'openai'\nheaders = { a = 1 }\n", "headers"),
        ("[endpoints\n", "Could not read"),
    ],
)
def test_bad_config_says_what_to_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, match: str
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(text)
    monkeypatch.setenv("IPYAGENT_CONFIG", str(config))
    with pytest.raises(UserError, match=match) as info:
        provider_for("x/m")
    assert info.value.code == "invalid_config" and info.value.hint


def test_config_path_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("IPYAGENT_CONFIG")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert endpoints.config_path() == tmp_path / "ipyagent" / "config.toml"


@pytest.mark.parametrize(
    ("model_id", "limit"),
    [
        ("openai/gpt-4.1", 1_047_576),
        ("openai/gpt-4.1-mini", 1_047_576),
        ("openai/gpt-4o-mini", 128_000),
        ("openai/gpt-4", 8_192),
        ("anthropic/claude-sonnet-4-5", 200_000),
        ("openrouter/meta-llama/llama-3-8b", 8_192),
        ("together/meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo", 131_072),
        ("ollama/qwen3:8b", 40_960),
        ("deepseek/deepseek-chat", 128_000),
        ("gemini/gemini-2.5-flash-lite", 1_048_576),
        ("mistral/mistral-small-latest", 131_072),
        ("xai/grok-4", 256_000),
        ("fireworks/accounts/fireworks/models/gpt-oss-120b", 131_072),
        ("huggingface/openai/gpt-oss-120b", 131_072),
        ("ollama/some-unknown-model", None),
        ("gpt-4o", 128_000),
    ],
)
def test_context_limit(model_id: str, limit: int | None) -> None:
    assert context_limit(model_id) == limit
