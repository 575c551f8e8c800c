"""Service tiers and per-call tool fees in the price arithmetic: a tier's rates replace
the base ones, fees add per call, what has no price makes the cost unknown."""

from __future__ import annotations

from decimal import Decimal as D
from typing import Any

import pytest

from gateway.domain.config import ConfigError, parse_config
from gateway.domain.pricing import (
    PriceCatalog,
    PriceUnavailable,
    Rates,
    TokenUsage,
    service_tier_name,
)

PRICES: dict[str, Any] = {
    "input": "2", "cached_input": "0.5", "output": "8",
    "service_tiers": {"flex": {"input": "1", "cached_input": "0.25", "output": "4"},
                      "priority": {"input": "3.5", "output": "14"}},
    "tool_fees": {"web_search": "0.01"},
}  # fmt: skip


def _catalog(prices: dict[str, Any], billing: dict[str, Any] | None = None) -> PriceCatalog:
    provider: dict[str, Any] = {"name": "p", "base_url": "http://127.0.0.1:1/v1"}
    if billing:
        provider["billing"] = billing
    model = {"name": "m", "provider": "p", "upstream_model": "m", "list_prices": prices}
    return PriceCatalog.from_config(parse_config({"providers": [provider], "models": [model]}))


USAGE = dict(prompt_tokens=1000, cached_prompt_tokens=200, completion_tokens=500)


@pytest.mark.parametrize(("tier", "expected"), [
    # 800 × 2 + 200 × 0.5 + 500 × 8 per 1M = 0.0016 + 0.0001 + 0.004
    (None, D("0.0057")),
    # 800 × 1 + 200 × 0.25 + 500 × 4 per 1M = 0.0008 + 0.00005 + 0.002
    ("flex", D("0.00285")),
    # no cached rate at priority: cached at its input rate, 1000 × 3.5 + 500 × 14
    ("priority", D("0.0105")),
])  # fmt: skip
def test_each_tier_is_priced_at_its_own_rates(tier: str | None, expected: D) -> None:
    p = _catalog(PRICES).price("m", TokenUsage(**USAGE, service_tier=tier))
    assert (p.actual_cost, p.list_cost_usd, p.tool_fee_cost) == (expected, expected, D(0))


def test_web_search_calls_add_their_fee_per_call_to_the_cost() -> None:
    # tokens 0.0057 + 3 calls × $0.01
    p = _catalog(PRICES).price("m", TokenUsage(**USAGE, web_search_calls=3))
    assert (p.actual_cost, p.tool_fee_cost) == (D("0.0357"), D("0.03"))
    assert p.list_cost_usd == D("0.0357")


def test_a_multiplier_and_fx_scale_tiers_and_fees_as_the_base() -> None:
    cat = _catalog(PRICES, billing={"currency": "eur", "fx_per_usd": "0.8", "multiplier": "0.5"})
    p = cat.price("m", TokenUsage(**USAGE, service_tier="flex", web_search_calls=2))
    # billed: (0.00285 + 0.02) × 0.5 = 0.011425 EUR = 0.01428125 USD; list 0.02285 USD
    assert (p.actual_cost, p.actual_cost_usd, p.list_cost_usd) == (
        D("0.011425"), D("0.01428125"), D("0.02285"))
    assert p.tool_fee_cost == D("0.01")


def test_a_tier_or_a_tool_call_without_a_price_makes_the_cost_unknown() -> None:
    cat = _catalog({"input": "2", "output": "8"})
    with pytest.raises(PriceUnavailable):
        cat.price("m", TokenUsage(**USAGE, service_tier="priority"))
    with pytest.raises(PriceUnavailable):
        cat.price("m", TokenUsage(**USAGE, web_search_calls=1))


def test_standard_tier_names_take_the_base_price() -> None:
    assert [service_tier_name(t) for t in (None, "auto", "default", "standard", "flex")] == [
        None, None, None, None, "flex"]


def test_versions_without_tiers_keep_their_ids_and_tiers_change_them() -> None:
    plain = _catalog({"input": "2", "output": "8"}).versions["m"]
    assert "service_tiers" not in plain.list_rates.canonical()
    with_tiers = _catalog(PRICES).versions["m"]
    assert with_tiers.id != plain.id


def test_stored_extras_read_back_to_the_same_rates() -> None:
    rates = _catalog(PRICES).versions["m"].list_rates
    base = Rates(rates.input, rates.cached_input, rates.cache_write, rates.output,
                 rates.reasoning, rates.tiers)  # fmt: skip
    assert Rates.with_extras(base, rates.extras_json()).canonical() == rates.canonical()


@pytest.mark.parametrize("tiers", [{"default": {"input": 1, "output": 1}},
                                   {"Flex!": {"input": 1, "output": 1}}])
def test_a_standard_or_malformed_tier_name_is_a_config_error(tiers: dict[str, Any]) -> None:
    with pytest.raises((ConfigError, ValueError)):
        _catalog({"input": "2", "output": "8", "service_tiers": tiers})
