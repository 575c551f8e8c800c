"""The worst case of a request: the dearest model of the route, tiers, reasoning rates,
the output bound's sources, and what cannot be priced."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import yaml

from gateway.domain.config import Config, default_config_path, parse_config
from gateway.domain.pricing import PriceCatalog
from gateway.quota.worst_case import prompt_bound, worst_case

MESSAGES = [{"role": "user", "content": "hi"}]


def _config(**model_fields: Any) -> Config:
    data = yaml.safe_load(default_config_path().read_text())
    for m in data["models"]:
        m.update(model_fields.get(m["name"], {}))
    return parse_config(data)


def test_the_dearest_model_of_the_route_sets_the_price() -> None:
    cfg = _config()
    catalog = PriceCatalog.from_config(cfg)
    cheap = worst_case(cfg, catalog, ["gpt-4o-mini"], MESSAGES, max_tokens=100)
    both = worst_case(cfg, catalog, ["gpt-4o-mini", "gpt-4o"], MESSAGES, max_tokens=100)
    prompt = prompt_bound(MESSAGES, "gpt-4o")
    assert both.cost_usd == (prompt * Decimal("2.5") + 100 * Decimal(10)) / Decimal(10**6)
    assert cheap.cost_usd is not None and both.cost_usd is not None
    assert cheap.cost_usd < both.cost_usd
    assert both.tokens == prompt + 100


def test_a_tier_the_prompt_may_reach_is_priced_in() -> None:
    cfg = _config()
    catalog = PriceCatalog.from_config(cfg)
    long_prompt = [{"role": "user", "content": "word " * 190_000}]
    wc = worst_case(cfg, catalog, ["gemini-2.5-pro"], long_prompt, max_tokens=1000)
    assert wc.prompt_tokens > 200_000  # the margin carries it past the tier's edge
    at_tier = (wc.prompt_tokens * Decimal("2.5") + 1000 * Decimal(15)) / Decimal(10**6)
    assert wc.cost_usd == at_tier.quantize(Decimal("1E-10"))


def test_without_max_tokens_the_key_cap_then_the_models_limit_bound_the_output() -> None:
    cfg = _config(**{"gpt-4o": {"max_output_tokens": 4096}})
    catalog = PriceCatalog.from_config(cfg)
    assert worst_case(cfg, catalog, ["gpt-4o"], MESSAGES, max_tokens=None).output_tokens == 4096
    capped = worst_case(cfg, catalog, ["gpt-4o"], MESSAGES, max_tokens=None, key_cap=50)
    assert capped.output_tokens == 50
    unbounded = worst_case(cfg, catalog, ["gpt-4o-mini"], MESSAGES, max_tokens=None)
    assert unbounded.cost_usd is None and "max_tokens" in unbounded.why_unpriced


def test_a_model_without_a_price_cannot_be_priced() -> None:
    data = yaml.safe_load(default_config_path().read_text())
    for m in data["models"]:
        if m["name"] == "gpt-4o":
            m.pop("list_prices", None)
    cfg = parse_config(data)
    wc = worst_case(cfg, PriceCatalog.from_config(cfg), ["gpt-4o"], MESSAGES, max_tokens=10)
    assert wc.cost_usd is None and "gpt-4o" in wc.why_unpriced


def test_each_output_asked_for_is_priced_and_the_prompt_once() -> None:
    cfg = _config()
    catalog = PriceCatalog.from_config(cfg)
    one = worst_case(cfg, catalog, ["gpt-4o"], MESSAGES, max_tokens=100)
    eight = worst_case(cfg, catalog, ["gpt-4o"], MESSAGES, max_tokens=100, outputs=8)
    prompt = prompt_bound(MESSAGES, "gpt-4o")
    assert eight.output_tokens == 800 and eight.tokens == prompt + 800
    assert eight.cost_usd == (prompt * Decimal("2.5") + 800 * Decimal(10)) / Decimal(10**6)
    assert one.cost_usd is not None and eight.cost_usd is not None
    assert eight.cost_usd > 7 * one.cost_usd


def test_a_prompt_of_millions_of_characters_is_priced_not_raised_on() -> None:
    cfg = _config()
    catalog = PriceCatalog.from_config(cfg)
    huge = [{"role": "user", "content": "a" * 3_000_000}]  # bpe-openai alone refuses it
    wc = worst_case(cfg, catalog, ["gpt-4o"], huge, max_tokens=10)
    assert wc.prompt_tokens > 375_000 and wc.cost_usd is not None


def _tiered() -> tuple[Config, PriceCatalog]:
    cfg = _config(**{"gpt-4o-mini": {
        "max_tool_calls": 5,
        "list_prices": {"input": "0.15", "output": "0.6",
                        "service_tiers": {"priority": {"input": "0.3", "output": "1.2"}},
                        "tool_fees": {"web_search": "0.01"}},
    }})  # fmt: skip
    return cfg, PriceCatalog.from_config(cfg)


def test_a_service_tier_reserves_at_its_own_rates() -> None:
    cfg, catalog = _tiered()
    prompt = prompt_bound(MESSAGES, "gpt-4o-mini")
    worst = worst_case(cfg, catalog, ["gpt-4o-mini"], MESSAGES, max_tokens=100,
                       service_tier="priority")  # fmt: skip
    assert worst.cost_usd == (prompt * Decimal("0.3") + 100 * Decimal("1.2")) / Decimal(10**6)
    flex = worst_case(cfg, catalog, ["gpt-4o-mini"], MESSAGES, max_tokens=100,
                      service_tier="flex")  # fmt: skip
    assert flex.cost_usd is None and "'flex' tier" in flex.why_unpriced


def test_web_search_reserves_its_most_calls_times_the_fee() -> None:
    cfg, catalog = _tiered()
    prompt = prompt_bound(MESSAGES, "gpt-4o-mini")
    tokens = (prompt * Decimal("0.15") + 100 * Decimal("0.6")) / Decimal(10**6)
    asked = worst_case(cfg, catalog, ["gpt-4o-mini"], MESSAGES, max_tokens=100,
                       web_search=True, max_searches=3)  # fmt: skip
    assert asked.cost_usd == tokens + 3 * Decimal("0.01")
    capped = worst_case(cfg, catalog, ["gpt-4o-mini"], MESSAGES, max_tokens=100,
                        web_search=True)  # fmt: skip
    assert capped.cost_usd == tokens + 5 * Decimal("0.01")  # the model's max_tool_calls
    unfeed = worst_case(cfg, catalog, ["gpt-4o"], MESSAGES, max_tokens=100, web_search=True)
    assert unfeed.cost_usd is None
