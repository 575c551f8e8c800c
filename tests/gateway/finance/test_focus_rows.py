"""Ledger groups as FOCUS rows: a row per token class, costs meaning what FOCUS says,
totals equal to the ledger's, every row passing the column rules."""

from __future__ import annotations

import dataclasses
from decimal import Decimal

from gateway.finance.focus_columns import HEADER, check_rows
from gateway.finance.focus_rows import csv_value, focus_rows, publisher_of
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
