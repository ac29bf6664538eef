"""The utility model: side calls (compaction's summaries, the summaries plugin) go to a small
model, their usage is priced at its price, counted in the conversation's and shown apart."""

from __future__ import annotations

from pathlib import Path

import pytest

from ipyagent import Agent
from ipyagent.agentlib import endpoints, prices
from ipyagent.agentlib.endpoints import utility_model_id
from ipyagent.agentlib.messages import Message, TextBlock
from ipyagent.agentlib.sessions import read_session
from ipyagent.agentlib.summaries import Summaries
from ipyagent.agentlib.usage import Usage
from ipyagent.testing import ScriptedModel, text, usage

KEYS = [env for env, _ in endpoints.DEFAULT_BY_KEY] + [
    "OPENAI_BASE_URL",
    "ANTHROPIC_BASE_URL",
    "IPYAGENT_MODEL",
]


@pytest.fixture(autouse=True)
def clean(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in KEYS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("IPYAGENT_CONFIG", str(tmp_path / "no-config.toml"))
    # Prices set here stay here.
    monkeypatch.setattr(prices, "_overrides", dict(prices._overrides))
    monkeypatch.setattr(prices, "_table", None)


def history(turns: int) -> list[Message]:
    out: list[Message] = []
    for n in range(turns):
        out += [
            Message.user(f"question {n}"),
            Message(role="assistant", content=(TextBlock(text=f"answer {n}"),)),
        ]
    return out


@pytest.mark.parametrize(
    ("model", "utility"),
    [
        ("openai/gpt-4.1", "openai/gpt-4.1-mini"),
        ("openai/gpt-4o", "openai/gpt-4.1-mini"),
        ("openai/gpt-4.1-mini", "openai/gpt-4.1-mini"),  # itself
        ("openai/gpt-4.1-nano", "openai/gpt-4.1-nano"),  # the small model costs more: itself
        ("openai/gpt-5-something-unpriced", "openai/gpt-4.1-mini"),
        ("anthropic/claude-sonnet-4-5", "anthropic/claude-haiku-4-5"),
        ("anthropic/claude-opus-4-1", "anthropic/claude-haiku-4-5"),
        ("gemini/gemini-2.5-pro", "gemini/gemini-2.5-flash-lite"),
        ("gemini/gemini-2.5-flash", "gemini/gemini-2.5-flash-lite"),
        ("mistral/mistral-medium-latest", "mistral/mistral-small-latest"),
        ("xai/grok-4", "xai/grok-4"),  # no small model known: the run's own
        ("cerebras/gpt-oss-120b", "cerebras/gpt-oss-120b"),
        ("ollama/qwen3", "ollama/qwen3"),
        ("local/default", "local/default"),
        ("openrouter/anthropic/claude-sonnet-4-5", "openrouter/anthropic/claude-sonnet-4-5"),
    ],
)
def test_default_utility_model(model: str, utility: str) -> None:
    assert utility_model_id(model) == utility


def test_no_small_model_behind_another_url(monkeypatch: pytest.MonkeyPatch) -> None:
    """A proxy or another server behind OPENAI_BASE_URL may not serve gpt-4.1-mini."""
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    assert utility_model_id("openai/gpt-4.1") == "openai/gpt-4.1"


def test_the_agents_utility_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789")
    agent = Agent(model="openai/gpt-4.1", mcp=False)
    assert agent.utility_provider.model_id == "openai/gpt-4.1-mini"
    agent.utility_model = "openai/gpt-4o-mini"
    assert agent.utility_provider.model_id == "openai/gpt-4o-mini"
    scripted = ScriptedModel([], model_id="scripted/main")
    assert Agent(model=scripted, mcp=False).utility_provider is scripted  # a provider object: itself
    assert Agent(model="openai/gpt-4.1-nano", mcp=False).utility_provider.model_id == "openai/gpt-4.1-nano"


async def test_compaction_uses_the_utility_model_and_counts_it_apart(tmp_path: Path) -> None:
    prices.set_prices({"scripted/small": {"input": 1.0, "output": 2.0}})
    main = ScriptedModel(["main reply"], model_id="scripted/main")
    small = ScriptedModel(
        [[usage(input_tokens=1_000_000, output_tokens=500_000), text("The user asked questions.")]],
        model_id="scripted/small",
    )
    session = tmp_path / "a.agent.jsonl"
    agent = Agent(
        model=main, utility_model=small, session=session, messages=history(6), compact_keep=2, mcp=False
    )
    result = await agent.compact()
    assert not result.fallback and len(small.requests) == 1 and main.requests == []
    spent = Usage(
        input_tokens=1_000_000, output_tokens=500_000, requests=1, cost=2.0
    )  # priced as the small model
    assert agent.usage == spent  # counted in the conversation's usage
    assert agent.utility_usage == spent  # and shown apart
    await agent.run("go on")
    assert len(main.requests) == 1 and agent.utility_usage == spent
    assert agent.usage.requests == 2
    agent.close()
    state = read_session(session)  # the part survives a restart
    assert state.usage.requests == 2 and state.utility_usage == spent


async def test_the_run_compacts_with_the_utility_model() -> None:
    main = ScriptedModel(
        [[usage(input_tokens=95_000), text("done")]], model_id="scripted/main", context_limit=100_000
    )
    small = ScriptedModel(["A summary."], model_id="scripted/small")
    agent = Agent(model=main, utility_model=small, messages=history(6), compact_keep=2, mcp=False)
    await agent.run("first")
    await agent.run("second")  # the context passed the threshold: compacted before this request
    assert len(small.requests) == 1 and small.requests[0].model == "small"
    assert agent.utility_usage.requests == 1


async def test_the_summaries_plugin_asks_the_utility_model() -> None:
    main = ScriptedModel(["An answer."], model_id="scripted/main")
    small = ScriptedModel(
        [[usage(input_tokens=100, output_tokens=20), text("Summary: asked.\nAdvice: none.")]],
        model_id="scripted/small",
    )
    plugin = Summaries()
    agent = Agent(model=main, utility_model=small, plugins=[plugin], mcp=False)
    await agent.run("hi")
    assert len(main.requests) == 1 and len(small.requests) == 1
    assert plugin.records()[0].summary == "asked."
    assert agent.utility_usage.input_tokens == 100 and agent.usage.requests == 2
