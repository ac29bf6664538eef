"""The price table: known models, dated snapshots, endpoint-wide prices, the config file's
overrides, and the provider's own cost first."""

from __future__ import annotations

from pathlib import Path

import pytest

from ipyagent import Usage
from ipyagent.agentlib.errors import UserError
from ipyagent.agentlib.prices import Price, cache_saving, cost_of, price_for, priced


@pytest.fixture(autouse=True)
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "config.toml"
    monkeypatch.setenv("IPYAGENT_CONFIG", str(path))
    return path


def test_known_models_are_found_by_id_name_and_snapshot() -> None:
    assert price_for("openai/gpt-4.1") == Price(input=2.0, output=8.0, cache_read=0.5)
    assert price_for("openai/gpt-4.1-2025-04-14") == price_for("openai/gpt-4.1")
    assert price_for("openrouter/anthropic/claude-sonnet-4-5") is not None  # the last segment's price
    assert price_for("local/qwen2.5-coder-1.5b") == Price(input=0.0, output=0.0)  # runs here: free
    assert price_for("openai/some-new-model") is None


def test_cache_reads_and_writes_are_priced_apart() -> None:
    # Anthropic: input_tokens counts the cache writes; they cost 1.25x input, reads 0.1x.
    usage = Usage(
        input_tokens=1_000_000, cache_write_tokens=400_000, cache_read_tokens=2_000_000, output_tokens=0
    )
    price = Price(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75)
    assert cost_of(usage, price) == pytest.approx(0.6 * 3.0 + 0.4 * 3.75 + 2.0 * 0.3)


def test_one_hour_cache_writes_cost_twice_the_input() -> None:
    usage = Usage(input_tokens=1_000_000, cache_write_tokens=1_000_000, cache_write_1h_tokens=600_000)
    price = price_for("anthropic/claude-sonnet-4-5")
    assert price is not None
    assert cost_of(usage, price) == pytest.approx(0.4 * 3.75 + 0.6 * 6.0)
    # Without a 1-hour price, a 1-hour write costs what a 5-minute one does.
    assert cost_of(usage, Price(input=3.0, output=15.0, cache_write=3.75)) == pytest.approx(3.75)


@pytest.mark.parametrize(
    "model", ["claude-opus-4-1", "claude-opus-4", "claude-sonnet-4-5", "claude-sonnet-4", "claude-haiku-4-5"]
)
def test_claude_cache_prices_follow_anthropic_ratios(model: str) -> None:
    price = price_for(f"anthropic/{model}")
    assert price is not None and price.cache_read is not None
    assert price.cache_read == pytest.approx(0.1 * price.input)
    assert price.cache_write == pytest.approx(1.25 * price.input)
    assert price.cache_write_1h == pytest.approx(2 * price.input)


@pytest.mark.parametrize(
    "model", ["gpt-4.1", "gpt-4.1-mini", "gpt-4.1-nano", "gpt-4o", "gpt-4o-mini", "o3", "o4-mini"]
)
def test_openai_models_know_their_cached_input_price(model: str) -> None:
    price = price_for(f"openai/{model}")
    assert price is not None and price.cache_read is not None and price.cache_read < price.input
    assert price.cache_write is None  # OpenAI charges nothing extra to write its cache


def test_what_caching_saved() -> None:
    price = Price(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75)
    # A turn that writes 10k tokens to the cache pays 0.25x more on them than uncached ...
    write = Usage(input_tokens=10_100, cache_write_tokens=10_000, output_tokens=50)
    assert cache_saving(write, price) == pytest.approx(-10_000 * 0.75 / 1e6)
    # ... and each turn that reads them back saves 0.9x of their input price.
    read = Usage(input_tokens=100, cache_read_tokens=10_000, output_tokens=50)
    assert cache_saving(read, price) == pytest.approx(10_000 * 2.7 / 1e6)
    total = priced(write, "anthropic/claude-sonnet-4-5") + priced(read, "anthropic/claude-sonnet-4-5")
    assert total.cache_saved == pytest.approx((27_000 - 7_500) / 1e6)
    assert total.cost == pytest.approx(cost_of(write, price) + cost_of(read, price))
    assert "caching saved $0.0195" in str(total) and "(10,000 cached)" in str(total)
    # Nothing cached, nothing saved (and nothing said); no price, no saving.
    assert priced(Usage(input_tokens=100), "anthropic/claude-sonnet-4-5").cache_saved is None
    assert priced(read, "openai/unknown").cache_saved is None
    # A provider's own cost is kept; the saving is still computed from the table.
    reported = priced(read.model_copy(update={"cost": 0.5}), "anthropic/claude-sonnet-4-5")
    assert reported.cost == 0.5 and reported.cache_saved == pytest.approx(0.027)


def test_a_reported_cost_wins_over_the_table() -> None:
    reported = Usage(input_tokens=1_000, output_tokens=1_000, cost=0.123)
    assert priced(reported, "openai/gpt-4.1").cost == 0.123
    assert priced(Usage(input_tokens=1_000_000), "openai/gpt-4.1").cost == pytest.approx(2.0)
    assert priced(Usage(input_tokens=1_000_000), "openai/unknown").cost is None


def test_the_config_file_overrides_and_adds_prices(config: Path) -> None:
    config.write_text(
        '[prices."gpt-4.1"]\ninput = 1.0\noutput = 4.0\n\n[prices."myhost/*"]\ninput = 0.5\noutput = 0.5\n'
    )
    assert price_for("openai/gpt-4.1") == Price(input=1.0, output=4.0)
    assert price_for("myhost/any-model") == Price(input=0.5, output=0.5)


@pytest.mark.parametrize(
    "text",
    [
        '[prices."m"]\ninput = 1.0\n',
        '[prices."m"]\ninput = "cheap"\noutput = 1\n',
        '[prices."m"]\ninput=1\noutput=1\nextra=2\n',
    ],
)
def test_a_malformed_price_says_where_and_how_to_fix_it(config: Path, text: str) -> None:
    config.write_text(text)
    with pytest.raises(UserError) as info:
        price_for("x/m")
    assert str(config) in str(info.value) and "dollars per million tokens" in (info.value.hint or "")


def test_the_cache_line_of_a_model_that_costs_nothing_counts_tokens_not_dollars() -> None:
    from ipyagent.agentlib.usage import cache_summary

    local = Usage(input_tokens=835, cache_read_tokens=907, cost=0.0, cache_saved=0.0)
    assert cache_summary(local) == "prompt cache: 907 of 1,742 prompt tokens read from it (52%), 0 written"
    paid = Usage(input_tokens=1000, cache_read_tokens=9000, cost=0.01, cache_saved=0.0243)
    assert cache_summary(paid).endswith("; caching saved $0.0243")


def test_a_run_prices_its_requests_at_the_price_it_started_with(config: Path) -> None:
    # The price is looked up once per run (it is asked on every request otherwise): a price
    # changed while a run goes on applies from the next run, to all of its requests.
    from ipyagent import Agent, tool
    from ipyagent.testing import ScriptedModel, text, tool_call, usage

    config.write_text('[prices."scripted/*"]\ninput = 1.0\noutput = 0.0\n')

    @tool(read_only=True)
    def raise_prices() -> str:
        """Make the model dearer."""
        config.write_text('[prices."scripted/*"]\ninput = 3.0\noutput = 0.0\n')
        return "done"

    spent = usage(input_tokens=1_000_000, output_tokens=0)
    model = ScriptedModel(
        [[tool_call("raise_prices", {}), spent], [text("ok"), spent], [text("again"), spent]]
    )
    agent = Agent(model=model, tools=[raise_prices])
    first = agent.run_sync("go")
    assert first.usage.cost == pytest.approx(2.0)  # two requests at $1 a million
    second = agent.run_sync("again")
    assert second.usage.cost == pytest.approx(3.0)
