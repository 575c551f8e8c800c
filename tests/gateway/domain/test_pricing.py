"""Cost = usage × price version: the issue's worked examples and the rules around them."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from gateway.domain.config import ConfigError, default_config_path, load_config, parse_config
from gateway.domain.pricing import (
    TOKEN_CLASSES,
    PriceCatalog,
    PriceUnavailable,
    TokenUsage,
    quantize_money,
)

D = Decimal
ONE_M_OUTPUT = TokenUsage(completion_tokens=1_000_000)


@pytest.fixture(scope="module")
def catalog() -> PriceCatalog:
    return PriceCatalog.from_config(load_config(default_config_path()))


def _catalog(models: list[dict[str, Any]], billing: dict[str, Any] | None = None) -> PriceCatalog:
    provider: dict[str, Any] = {"name": "p", "base_url": "http://127.0.0.1:1/v1"}
    if billing:
        provider["billing"] = billing
    for m in models:
        m.setdefault("provider", "p")
        m.setdefault("upstream_model", m["name"])
    return PriceCatalog.from_config(parse_config({"providers": [provider], "models": models}))


def test_one_million_gpt41_output_tokens_cost_eight_dollars_at_list(catalog: PriceCatalog) -> None:
    p = catalog.price("gpt-4.1", ONE_M_OUTPUT)
    assert p.list_cost_usd == D("8.00")
    assert (p.billing_currency, p.actual_cost, p.actual_cost_usd) == ("USD", D(8), D(8))
    assert p.savings_usd == 0


def test_relay_bills_eight_yuan_which_is_1_0959_dollars_and_saves_86_3_percent(
    catalog: PriceCatalog,
) -> None:
    p = catalog.price("relay-gpt-4.1", ONE_M_OUTPUT)
    assert (p.billing_currency, p.actual_cost) == ("CNY", D("8.00"))
    # 8 / 7.3 = 1.09589041095890..., rounded once to 10 places (half-even)
    assert p.actual_cost_usd == D("1.0958904110")
    assert p.actual_cost_usd.quantize(D("0.0001")) == D("1.0959")
    assert p.list_cost_usd == D(8)
    assert p.savings_usd == D("6.9041095890")
    assert (p.savings_usd / p.list_cost_usd * 100).quantize(D("0.1")) == D("86.3")


def test_seeds_month_auto_mix_against_gpt41_baseline_implies_5_498_dollars_routing_savings(
    catalog: PriceCatalog,
) -> None:
    # 1,000,000 output tokens routed 60/30/10 by `auto`, each priced against gpt-4.1
    mix = {"deepseek-v3.2": 600_000, "gemini-2.5-flash": 300_000, "claude-sonnet-4.5": 100_000}
    priced = [
        catalog.price(model, TokenUsage(completion_tokens=n), baseline_model="gpt-4.1")
        for model, n in mix.items()
    ]
    assert [p.list_cost_usd for p in priced] == [D("0.252"), D("0.75"), D("1.5")]
    list_total = sum(p.list_cost_usd for p in priced)
    baseline_total = sum(p.baseline_cost_usd or D(0) for p in priced)
    routing_savings = sum(p.routing_savings_usd or D(0) for p in priced)
    assert (list_total, baseline_total, routing_savings) == (D("2.502"), D(8), D("5.498"))
    assert (routing_savings / baseline_total * 100).quantize(D("0.1")) == D("68.7")


def test_cached_prompt_tokens_are_charged_at_the_cached_rate(catalog: PriceCatalog) -> None:
    usage = TokenUsage(prompt_tokens=1_000_000, cached_prompt_tokens=400_000)
    # 600k uncached × $2.00 + 400k cached × $0.50
    assert catalog.price("gpt-4.1", usage).list_cost_usd == D("1.4")


def test_cached_tokens_fall_back_to_the_input_rate_without_a_cached_price() -> None:
    cat = _catalog([{"name": "m", "list_prices": {"input": 2, "output": 8}}])
    usage = TokenUsage(prompt_tokens=1_000_000, cached_prompt_tokens=400_000)
    assert cat.price("m", usage).list_cost_usd == D(2)


def test_cache_writes_are_charged_at_the_cache_write_rate(catalog: PriceCatalog) -> None:
    usage = TokenUsage(prompt_tokens=1_000_000, cache_write_tokens=1_000_000)
    assert catalog.price("claude-sonnet-4.5", usage).list_cost_usd == D("3.75")


def test_relay_price_above_list_gives_negative_savings(catalog: PriceCatalog) -> None:
    # the relay's own table lists deepseek-chat at ¥3.80 output; the official price is $0.42
    p = catalog.price("relay-deepseek-v3.2", ONE_M_OUTPUT)
    assert (p.billing_currency, p.actual_cost) == ("CNY", D("3.80"))
    assert p.actual_cost_usd == D("0.5205479452")
    assert p.list_cost_usd == D("0.42")
    assert p.savings_usd == D("-0.1005479452")


def test_reasoning_tokens_use_the_reasoning_rate_where_set_else_the_output_rate() -> None:
    cat = _catalog(
        [
            {"name": "thinker", "list_prices": {"input": 1, "output": 4, "reasoning": 10}},
            {"name": "plain", "list_prices": {"input": 1, "output": 4}},
        ]
    )
    usage = TokenUsage(completion_tokens=1_000_000, reasoning_tokens=250_000)
    assert cat.price("thinker", usage).list_cost_usd == D("5.5")  # 750k × 4 + 250k × 10
    assert cat.price("plain", usage).list_cost_usd == D(4)


def test_tier_prices_apply_only_strictly_above_the_prompt_size(catalog: PriceCatalog) -> None:
    at = TokenUsage(prompt_tokens=200_000, completion_tokens=1_000)
    above = TokenUsage(prompt_tokens=200_001, completion_tokens=1_000)
    assert catalog.price("gemini-2.5-pro", at).list_cost_usd == D("0.26")  # 0.25 + 0.01
    # 200,001 × $2.50/M + 1,000 × $15/M
    assert catalog.price("gemini-2.5-pro", above).list_cost_usd == D("0.5150025")


def test_multiplier_billing_scales_list_prices_in_the_providers_currency() -> None:
    cat = _catalog(
        [{"name": "m", "list_prices": {"input": 1, "output": 3}}],
        billing={"currency": "eur", "fx_per_usd": "0.8", "multiplier": "0.5"},
    )
    p = cat.price("m", TokenUsage(prompt_tokens=1_000_000, completion_tokens=1_000_000))
    assert (p.billing_currency, p.actual_cost, p.actual_cost_usd) == ("EUR", D(2), D("2.5"))
    assert p.list_cost_usd == D(4)


def test_amounts_round_half_even_to_ten_places() -> None:
    cat = _catalog([{"name": "m", "list_prices": {"input": "0.00005", "output": 0}}])
    # one token at $0.00005/M = 5E-11 exactly: half-even rounds to 0, not up
    assert cat.price("m", TokenUsage(prompt_tokens=1)).list_cost_usd == D(0)
    assert cat.price("m", TokenUsage(prompt_tokens=3)).list_cost_usd == D("2E-10")
    assert quantize_money(D("0.00000000015")) == D("2E-10")


def test_version_ids_are_deterministic_and_change_with_any_price_or_rate() -> None:
    def vid(output: Any, fx: Any = 1) -> Any:
        cat = _catalog(
            [{"name": "m", "list_prices": {"input": 1, "output": output}}],
            billing={"fx_per_usd": fx},
        )
        return cat.price("m", ONE_M_OUTPUT).price_version_id

    assert vid("8.00") == vid(8) == vid("8")
    assert vid(8) != vid(9)
    assert vid(8) != vid(8, fx="7.3")


def test_example_config_versions_are_unique_per_model(catalog: PriceCatalog) -> None:
    ids = {v.id for v in catalog.versions.values()}
    assert len(ids) == len(catalog.versions) == 13


def test_unknown_model_has_no_price_and_unknown_baseline_gives_no_baseline_cost(
    catalog: PriceCatalog,
) -> None:
    with pytest.raises(PriceUnavailable):
        catalog.price("no-such-model", ONE_M_OUTPUT)
    p = catalog.price("gpt-4.1", ONE_M_OUTPUT, baseline_model="no-such-model")
    assert p.baseline_cost_usd is None and p.routing_savings_usd is None


def test_billed_prices_in_usd_for_the_models_listing(catalog: PriceCatalog) -> None:
    v = catalog.version("relay-gpt-4.1")
    assert v is not None
    usd = v.billed_usd_per_mtok()
    assert (usd.input, usd.output) == (D("0.2739726027"), D("1.0958904110"))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"prompt_tokens": -1},
        {"prompt_tokens": 10, "cached_prompt_tokens": 11},
        {"prompt_tokens": 10, "cached_prompt_tokens": 6, "cache_write_tokens": 5},
        {"completion_tokens": 1, "reasoning_tokens": 2},
    ],
)
def test_inconsistent_usage_is_rejected(kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        TokenUsage(**kwargs)


def test_each_token_class_is_priced_at_its_own_rate_and_they_sum_to_the_cost(
    catalog: PriceCatalog,
) -> None:
    usage = TokenUsage(
        prompt_tokens=10_000,
        cached_prompt_tokens=4_000,
        cache_write_tokens=2_000,
        completion_tokens=1_000,
        reasoning_tokens=400,
    )
    rates = catalog.version("claude-sonnet-4.5").list_rates  # type: ignore[union-attr]
    classes = rates.class_costs(usage)
    # 4,000 uncached at $3, 4,000 cached at $0.30, 2,000 written at $3.75, 600 visible
    # output and 400 reasoning at $15 (no reasoning rate: the output rate), per 1M
    assert classes == {
        "input": D("0.012"),
        "cached_input": D("0.0012"),
        "cache_write": D("0.0075"),
        "output": D("0.009"),
        "reasoning": D("0.006"),
    }
    assert tuple(classes) == TOKEN_CLASSES
    assert catalog.price("claude-sonnet-4.5", usage).list_cost_usd == D("0.0357")


def test_an_embedding_is_billed_on_its_input_tokens_only(catalog: PriceCatalog) -> None:
    p = catalog.price("text-embedding-3-small", TokenUsage(prompt_tokens=1_000_000))
    assert (p.list_cost_usd, p.actual_cost_usd) == (D("0.02"), D("0.02"))


def test_an_embedding_model_may_leave_out_its_output_price_a_chat_model_may_not() -> None:
    _catalog([{"name": "emb", "kind": "embedding", "list_prices": {"input": "0.13"}}])
    with pytest.raises(ConfigError, match="list_prices.output is required for a chat model"):
        _catalog([{"name": "chat", "list_prices": {"input": "1"}}])
