"""The price table: known models, dated snapshots, endpoint-wide prices, the config file's
overrides, and the provider's own cost first."""

from __future__ import annotations

from pathlib import Path

import pytest

from ipyagent import Usage
from ipyagent.agentlib.errors import UserError
from ipyagent.agentlib.prices import Price, cost_of, price_for, priced


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
