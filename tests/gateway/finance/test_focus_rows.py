"""Ledger groups as FOCUS rows: a row per token class, costs meaning what FOCUS says,
totals equal to the ledger's, every row passing the column rules."""

from __future__ import annotations

import dataclasses
import datetime
from decimal import Decimal

from gateway.finance.focus_columns import HEADER, check_rows
from gateway.finance.focus_rows import csv_value, focus_rows, group_rows, publisher_of
from gateway.finance.ledger_groups import Tokens
from tests.gateway.finance.conftest import group


def test_one_row_per_token_class_in_tokens(catalog):
    g = group(catalog, "gpt-4.1", Tokens(input=1000, cached_input=500, output=250))
    rows = list(focus_rows([g]))
    assert [r["x_TokenClass"] for r in rows] == ["input", "cached_input", "output"]
    assert [r["PricingQuantity"] for r in rows] == [1000, 500, 250]
    assert {r["PricingUnit"] for r in rows} == {"Tokens"}
    assert {r["ConsumedUnit"] for r in rows} == {"Tokens"}
    # gpt-4.1: $2.00 in, $0.50 cached, $8.00 out per 1M, billed in USD at list price
    assert [r["ListCost"] for r in rows] == [Decimal("0.002"), Decimal("0.00025"), Decimal("0.002")]
    assert [r["BilledCost"] for r in rows] == [r["ListCost"] for r in rows]
    assert rows[2]["ListUnitPrice"] == Decimal("0.000008")
    assert check_rows(rows) == []


def test_the_relays_list_cost_is_in_its_currency_and_above_what_it_bills(catalog):
    # the relay bills ¥1 per $1 of list price; the market rate is ¥7.3 per $1
    g = group(catalog, "relay-gpt-4.1", Tokens(input=0, output=1_000_000))
    (row,) = focus_rows([g])
    assert row["BillingCurrency"] == "CNY"
    assert row["ListCost"] == Decimal("58.4")  # $8.00 × 7.3
    assert row["BilledCost"] == Decimal("8")  # ¥8.00
    assert row["ContractedCost"] == row["EffectiveCost"] == row["BilledCost"]
    assert row["x_ListCostUsd"] == Decimal("8")
    assert row["x_BilledCostUsd"] == Decimal("1.0958904110")  # ¥8 / 7.3
    assert row["ProviderName"] == "relay" and row["PublisherName"] == "OpenAI"
    assert check_rows([row]) == []


def test_sums_of_rows_equal_the_ledgers_rounded_sums(catalog):
    # three requests of 7 in, 3 out on the relay's DeepSeek table (¥2.50/¥3.80 per 1M):
    # ¥0.0000289 each, $0.0000039589... rounded per request to 10 places
    tokens = Tokens(input=7, output=3)
    one = group(catalog, "relay-deepseek-v3.2", tokens)
    g = dataclasses.replace(
        group(catalog, "relay-deepseek-v3.2", Tokens(input=21, output=9), requests=3),
        list_cost_usd=one.list_cost_usd * 3,
        actual_cost=one.actual_cost * 3,
        actual_cost_usd=one.actual_cost_usd * 3,
    )
    rows = list(focus_rows([g]))
    assert sum(r["x_ListCostUsd"] for r in rows) == g.list_cost_usd
    assert sum(r["BilledCost"] for r in rows) == g.actual_cost
    assert sum(r["x_BilledCostUsd"] for r in rows) == g.actual_cost_usd


def test_a_cache_hit_keeps_its_list_cost_and_bills_nothing(catalog):
    g = group(catalog, "gpt-4.1", Tokens(input=1000, output=100), cache_hit=True)
    rows = list(focus_rows([g]))
    assert sum(r["ListCost"] for r in rows) == g.list_cost_usd > 0
    assert all(r["BilledCost"] == 0 == r["EffectiveCost"] for r in rows)
    assert {r["x_CacheHit"] for r in rows} == {"true"}


def test_app_team_and_key_are_sub_account_and_tags(catalog):
    (row,) = focus_rows([group(catalog, "gpt-4.1", Tokens(output=10), alias="auto")])
    assert row["SubAccountId"] == row["SubAccountName"] == "checkout"
    assert row["Tags"] == (
        '{"alias": "auto", "app": "checkout", "key_id": "00000000-0000-0000-0000-000000000007",'
        ' "team": "payments"}'
    )
    assert set(row) == set(HEADER)


def test_periods_are_the_day_and_its_calendar_month(catalog):
    (row,) = focus_rows([group(catalog, "gpt-4.1", Tokens(output=10))])
    assert row["ChargePeriodStart"] == "2026-11-03T00:00:00Z"
    assert row["ChargePeriodEnd"] == "2026-11-04T00:00:00Z"
    assert row["BillingPeriodStart"] == "2026-11-01T00:00:00Z"
    assert row["BillingPeriodEnd"] == "2026-12-01T00:00:00Z"


def test_csv_values_are_plain_decimals():
    assert csv_value(Decimal("8E-6")) == "0.000008"
    assert csv_value(Decimal("58.4000000000")) == "58.4"
    assert csv_value(Decimal("0E-10")) == "0"
    assert csv_value(None) == ""


def test_publishers_follow_the_model_family():
    assert publisher_of("relay-claude-sonnet-4.5", "claude-sonnet-4-5", "relay") == "Anthropic"
    assert publisher_of("deepseek-v3.2", "deepseek-chat", "deepseek") == "DeepSeek"
    assert publisher_of("house-model", "house-model", "acme") == "acme"


def test_a_batch_lines_rows_bill_the_batch_rate_with_their_own_category(catalog):
    # 1M input + 1M output tokens of gpt-4o-mini: $0.15 + $0.60 at list, half of it billed
    live = group(catalog, "gpt-4o-mini", Tokens(input=1_000_000, output=1_000_000))
    half = Decimal("0.5")
    batch = dataclasses.replace(live, batch=True, actual_cost=live.actual_cost * half,
                                actual_cost_usd=live.actual_cost_usd * half)
    rows = {r["x_TokenClass"]: r for r in group_rows(batch)}
    assert rows["input"]["BilledCost"] == Decimal("0.075")
    assert rows["output"]["BilledCost"] == Decimal("0.30")
    assert rows["output"]["ListCost"] == Decimal("0.60")
    assert rows["output"]["ContractedUnitPrice"] == Decimal("0.0000003")
    for r in rows.values():
        assert r["PricingCategory"] == "Other"
        assert r["ChargeDescription"].endswith("(Batch API, batch rate)")
        assert str(r["SkuId"]).endswith("/batch")
    assert {r["PricingCategory"] for r in group_rows(live)} == {"Standard"}


def test_web_search_calls_are_a_line_of_their_own_and_totals_still_hold():
    from gateway.domain.config import parse_config
    from gateway.domain.pricing import PriceCatalog, TokenUsage
    from gateway.finance.ledger_groups import LedgerGroup

    cfg = parse_config({
        "providers": [{"name": "openai", "base_url": "http://127.0.0.1:1/v1"}],
        "models": [{"name": "gpt-4o-mini", "provider": "openai", "upstream_model": "gpt-4o-mini",
                    "list_prices": {"input": "0.15", "output": "0.6",
                                    "tool_fees": {"web_search": "0.01"}}}],
    })  # fmt: skip
    catalog = PriceCatalog.from_config(cfg)
    tokens = Tokens(input=1000, output=500)
    # 1000 × 0.15 + 500 × 0.6 per 1M = $0.00045, and 3 calls × $0.01
    priced = catalog.price("gpt-4o-mini", TokenUsage(prompt_tokens=1000, completion_tokens=500,
                                                    web_search_calls=3))  # fmt: skip
    assert priced.actual_cost == Decimal("0.03045")
    g = LedgerGroup(day=datetime.date(2026, 12, 4),
                    app="a", team=None, key_id=None, alias=None, model="gpt-4o-mini",
                    provider="openai", version=catalog.versions["gpt-4o-mini"],
                    cache_hit=False, requests=1, tokens=tokens,
                    list_cost_usd=priced.list_cost_usd, actual_cost=priced.actual_cost,
                    actual_cost_usd=priced.actual_cost_usd, web_search_calls=3,
                    tool_fee_cost=priced.tool_fee_cost)  # fmt: skip
    rows = list(focus_rows([g]))
    assert [r["x_TokenClass"] for r in rows] == ["input", "output", "web_search"]
    search = rows[-1]
    assert search["ChargeDescription"] == "gpt-4o-mini web search calls via openai"
    assert (search["PricingQuantity"], search["PricingUnit"]) == (Decimal(3), "Requests")
    assert search["BilledCost"] == search["ListCost"] == Decimal("0.03")
    assert search["ListUnitPrice"] == Decimal("0.01")
    assert [r["BilledCost"] for r in rows[:2]] == [Decimal("0.00015"), Decimal("0.0003")]
    assert sum(r["BilledCost"] for r in rows) == g.actual_cost
    assert check_rows(rows) == []
