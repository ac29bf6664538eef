"""Fixtures of the adapter tests: a loopback wire server and a clean endpoint environment."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from wire_server import WireServer

from ipyagent.agentlib import endpoints

# Every variable the endpoints read: tests start from none of them set.
ENV_VARS = [
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "OLLAMA_HOST",
    "OLLAMA_API_KEY",
    "OPENROUTER_API_KEY",
    "GROQ_API_KEY",
    "TOGETHER_API_KEY",
    "DEEPSEEK_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "MISTRAL_API_KEY",
    "XAI_API_KEY",
    "FIREWORKS_API_KEY",
    "CEREBRAS_API_KEY",
    "HF_TOKEN",
    "IPYAGENT_MODEL",
    "XDG_CONFIG_HOME",
]


@pytest.fixture
async def server() -> AsyncIterator[WireServer]:
    srv = WireServer()
    await srv.start()
    yield srv
    await srv.stop()


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> Iterator[None]:
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    # No user config file leaks into the tests.
    monkeypatch.setenv("IPYAGENT_CONFIG", str(tmp_path) + "/no-config.toml")
    yield
    endpoints.unregister_all_endpoints()
