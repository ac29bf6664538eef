"""What a model's tokens cost: the price table and the cost of a request's usage.

Prices of known models ship in ``data/prices.toml`` (US dollars per million tokens); the
``[prices]`` tables of the config file (``~/.config/ipyagent/config.toml``) override or add to
them, and :func:`set_prices` does the same from code::

    [prices."gpt-4.1"]
    input = 2.0
    cache_read = 0.5
    output = 8.0

A model is looked up by its full id (``openai/gpt-4.1``), then by its name without the endpoint,
then with a date suffix dropped (``gpt-4.1-2025-04-14`` → ``gpt-4.1``), then by the last part of
a router's name (``openrouter/anthropic/claude-sonnet-4-5``), then as ``ENDPOINT/*``.
A provider that reports a request's cost (OpenRouter) is believed over the table. A model with no
price has no cost: usage shows tokens only, and a cost cap cannot apply (the run says so).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from .config_file import config_path, read_config, toml_module
from .errors import UserError
from .usage import Usage

__all__ = ["Price", "at_price", "cache_saving", "cost_of", "price_for", "priced", "set_prices"]

_FIELDS = ("input", "output", "cache_read", "cache_write", "cache_write_1h")
# "-2025-04-14", "-20250929", "-latest": a snapshot or alias of the model before it.
_SNAPSHOT = re.compile(r"-(?:\d{4}-\d{2}-\d{2}|\d{8}|latest)$")


@dataclass(frozen=True)
class Price:
    """US dollars per million tokens. Cache reads and writes cost ``input`` unless set;
    ``cache_write_1h`` (a write kept for an hour) costs ``cache_write`` unless set."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None
    cache_write_1h: float | None = None


_overrides: dict[str, Price] = {}


def set_prices(table: Mapping[str, Mapping[str, Any]], *, source: str = "set_prices") -> None:
    """Add or replace prices: ``{"gpt-4.1": {"input": 2.0, "output": 8.0}}``, keyed like the
    price table. Raises a :class:`UserError` naming ``source`` for a malformed entry."""
    global _table
    for name, fields in table.items():
        _overrides[name] = _price(name, fields, source)
    _table = None


def price_for(model_id: str) -> Price | None:
    """The price of ``model_id`` (``"openai/gpt-4.1"``), or None when it is not known."""
    table, found = _merged()
    if model_id not in found:  # asked on every request: looked up once per model and table
        found[model_id] = _lookup(table, model_id)
    return found[model_id]


def _lookup(table: dict[str, Price], model_id: str) -> Price | None:
    endpoint, _, name = model_id.partition("/") if "/" in model_id else ("", "", model_id)
    last = name.rsplit("/", 1)[-1]  # a router's "anthropic/claude-sonnet-4-5"
    for key in (model_id, name, _SNAPSHOT.sub("", name), last, _SNAPSHOT.sub("", last), f"{endpoint}/*"):
        if key and key in table:
            return table[key]
    return None


def cost_of(usage: Usage, price: Price) -> float:
    """What ``usage`` costs at ``price``, in US dollars."""
    read = price.input if price.cache_read is None else price.cache_read
    write = price.input if price.cache_write is None else price.cache_write
    write_1h = write if price.cache_write_1h is None else price.cache_write_1h
    # Usage counts cache writes inside input_tokens (see the Anthropic adapter): priced apart.
    uncached = max(0, usage.input_tokens - usage.cache_write_tokens)
    hour = min(usage.cache_write_1h_tokens, usage.cache_write_tokens)
    dollars = (
        uncached * price.input
        + usage.cache_read_tokens * read
        + (usage.cache_write_tokens - hour) * write
        + hour * write_1h
        + usage.output_tokens * price.output
    )
    return dollars / 1_000_000


def cache_saving(usage: Usage, price: Price) -> float:
    """What prompt caching saved on ``usage`` at ``price``, in US dollars: its cached tokens at
    the input price minus what they cost. Negative when cache writes (dearer than input at
    Anthropic) have not been read back enough yet to pay for themselves."""
    return cost_of(_uncached(usage), price) - cost_of(usage, price)


def _uncached(usage: Usage) -> Usage:
    """``usage`` as if nothing had been cached: every prompt token at the input price."""
    return usage.model_copy(
        update={
            "input_tokens": usage.input_tokens + usage.cache_read_tokens,
            "cache_read_tokens": 0,
            "cache_write_tokens": 0,
            "cache_write_1h_tokens": 0,
        }
    )


def priced(usage: Usage, model_id: str) -> Usage:
    """``usage`` with its cost (the provider's when it reported one, else the table's, else none)
    and, when a price is known, what prompt caching saved (:func:`cache_saving`)."""
    return at_price(usage, price_for(model_id))


def at_price(usage: Usage, price: Price | None) -> Usage:
    """``usage`` priced at ``price`` (see :func:`priced`)."""
    if price is None:
        return usage
    saved = cache_saving(usage, price) if usage.cache_read_tokens or usage.cache_write_tokens else None
    cost = cost_of(usage, price) if usage.cost is None else usage.cost
    return usage.model_copy(update={"cost": cost, "cache_saved": saved})


def _price(name: str, fields: Any, source: str) -> Price:
    if not isinstance(fields, Mapping) or not {"input", "output"} <= set(fields):
        raise UserError(
            f"In {source}, the price of {name!r} needs at least input and output.",
            hint='Write e.g. [prices."gpt-4.1"] input = 2.0, output = 8.0 (dollars per million tokens).',
            code="invalid_config",
        )
    unknown = sorted(set(fields) - set(_FIELDS))
    values = {k: fields[k] for k in _FIELDS if k in fields}
    if unknown or not all(
        isinstance(v, int | float) and not isinstance(v, bool) and v >= 0 for v in values.values()
    ):
        raise UserError(
            f"In {source}, the price of {name!r} is invalid: {dict(fields)!r}.",
            hint=f"Use the keys {', '.join(_FIELDS)}, each a number of dollars per million tokens.",
            code="invalid_config",
        )
    return Price(**{k: float(v) for k, v in values.items()})


@cache
def _shipped() -> dict[str, Price]:
    data = toml_module().loads(resources.files(__package__).joinpath("data/prices.toml").read_text("utf-8"))
    return {name: _price(name, fields, "ipyagent's price table") for name, fields in data.items()}


#: The merged price table, the config file's ``[prices]`` it was made from, and the price found
#: for each model id asked: asked on every request, it is made again only when that table (a new
#: parse of the file) or an override changes.
_table: tuple[object, dict[str, Price], dict[str, Price | None]] | None = None


def _merged() -> tuple[dict[str, Price], dict[str, Price | None]]:
    global _table
    path = config_path()
    configured = read_config(path).get("prices")  # the same object until the file changes
    table = _table
    if table is None or table[0] is not configured:
        table = _table = (configured, {**_shipped(), **_configured(configured, path), **_overrides}, {})
    return table[1], table[2]


def _configured(table: Any, path: Any) -> dict[str, Price]:
    if table is None:
        return {}
    if not isinstance(table, Mapping):
        raise UserError(
            f"In {path}, 'prices' must be a table of tables ([prices.\"MODEL\"]).",
            hint='Write e.g. [prices."gpt-4.1"] input = 2.0, output = 8.0.',
            code="invalid_config",
        )
    return {name: _price(name, fields, str(path)) for name, fields in table.items()}
