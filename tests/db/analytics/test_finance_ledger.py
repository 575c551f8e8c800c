"""The FOCUS export, the what-if and reconciliation read from the rollups of a real
PostgreSQL ledger, against figures worked out by hand (tests/db/analytics/finance_seed.py)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from db.analytics.finance_ledger import (
    ledger_by_day_model,
    ledger_groups,
    ledger_totals,
    whatif_rows,
)
from db.analytics.invoice_store import load_invoice, save_invoice
from gateway.domain.config import default_config_path, load_config
from gateway.finance.focus_columns import check_rows
from gateway.finance.focus_rows import focus_rows
from gateway.finance.invoices import InvoiceLine
from gateway.finance.reconcile import Threshold, flagged, invoice_totals, reconcile
from gateway.finance.whatif import PriceSheet, Scenario, summarize
from tests.db.analytics.finance_seed import (
    BOT_GPT41,
    CHECKOUT_DEEPSEEK,
    DAY2,
    DAY3,
    HAIKU,
    LEDGER_ACTUAL_USD,
    LEDGER_LIST_USD,
    RELAY_DEEPSEEK,
    RELAY_GPT41,
    clean_finance_tables,
    seed_finance_ledger,
)

D = Decimal
pytestmark = pytest.mark.usefixtures("clean_ledger")


@pytest.fixture
def seeded(ledger_engine):
    clean_finance_tables(ledger_engine)
    seed_finance_ledger(ledger_engine, load_config(default_config_path()))
    return ledger_engine


def test_the_focus_list_cost_equals_the_ledgers_and_the_relay_bills_below_it(seeded):
    rows = list(focus_rows(ledger_groups(seeded, DAY2, DAY3)))
    assert check_rows(rows) == []
    ledger = ledger_totals(seeded, DAY2, DAY3)
    assert ledger["list_cost_usd"] == LEDGER_LIST_USD == D("24.6396")  # by hand
    assert sum(r["x_ListCostUsd"] for r in rows) == LEDGER_LIST_USD
    assert sum(r["x_BilledCostUsd"] for r in rows) == LEDGER_ACTUAL_USD
    usd = sum(r["ListCost"] for r in rows if r["BillingCurrency"] == "USD")
    cny = sum(r["ListCost"] for r in rows if r["BillingCurrency"] == "CNY")
    assert usd == LEDGER_LIST_USD - D("10.70")  # every USD provider at list price
    assert cny == D("78.11")  # the relay's $10.70 of list price at ¥7.3
    relay = [r for r in rows if r["ProviderName"] == "relay"]
    by_model = {m: [r for r in relay if r["x_Model"] == m] for m in {r["x_Model"] for r in relay}}
    # the relay bills ¥1 per $1 of list price: ¥10 against ¥73 of list price...
    assert all(r["BilledCost"] < r["ListCost"] for r in by_model["relay-gpt-4.1"])
    assert sum(r["BilledCost"] for r in by_model["relay-gpt-4.1"]) == D(10)
    # ...and lists DeepSeek above the official price (¥6.30 against ¥5.11): shown as it is
    assert sum(r["BilledCost"] for r in by_model["relay-deepseek-v3.2"]) == D("6.30")


def test_the_focus_rows_carry_tokens_per_class_and_the_cache_hit_bills_nothing(seeded):
    rows = list(focus_rows(ledger_groups(seeded, DAY2, DAY2)))
    deepseek = {r["x_TokenClass"]: r["PricingQuantity"] for r in rows
                if r["x_Model"] == "deepseek-v3.2"}  # fmt: skip
    assert deepseek == {"input": 800_000, "cached_input": 200_000, "output": 500_000}
    (hit,) = [r for r in rows if r["x_CacheHit"] == "true"]
    assert (hit["ListCost"], hit["BilledCost"], hit["PricingQuantity"]) == (D(2), D(0), 1_000_000)


def test_whatif_routing_every_auto_request_to_gpt_41(seeded):
    scenario = Scenario(routing={"auto": {"gpt-4.1": D(1)}})
    rows = whatif_rows(seeded, DAY2, DAY3, scenario)
    # 800k in × $2.00 + 200k cached × $0.50 + 500k out × $8.00 = $5.70
    assert summarize(rows, "app")["checkout"] == (CHECKOUT_DEEPSEEK, D("5.70"))
    others = BOT_GPT41 + RELAY_GPT41 + RELAY_DEEPSEEK + HAIKU
    assert summarize(rows, "app")["bot"] == (others, others)
    assert summarize(rows, "total")["total"] == (LEDGER_ACTUAL_USD, others + D("5.70"))
    by_model = summarize(rows, "model")
    assert by_model["gpt-4.1"] == (BOT_GPT41, BOT_GPT41 + D("5.70"))
    assert by_model["deepseek-v3.2"] == (CHECKOUT_DEEPSEEK, D(0))
    assert summarize(rows, "day")[DAY2] == (CHECKOUT_DEEPSEEK + BOT_GPT41, D("15.70"))


def test_whatif_the_relay_at_another_fx_rate(seeded):
    rows = whatif_rows(
        seeded, DAY3, DAY3, Scenario(prices=PriceSheet(fx_per_usd={"relay": D("6.3")}))
    )
    by_model = summarize(rows, "model")
    assert by_model["relay-gpt-4.1"] == (RELAY_GPT41, D("1.5873015873"))  # ¥10 / 6.3
    assert by_model["relay-deepseek-v3.2"] == (RELAY_DEEPSEEK, D("1.0000000000"))  # ¥6.30 / 6.3
    assert by_model["claude-haiku-4.5"] == (HAIKU, HAIKU)


def test_reconciliation_by_day_and_model(seeded):
    ledger, currency = ledger_by_day_model(seeded, "openai", DAY2, DAY3)
    assert currency == "USD"
    assert ledger == {(DAY2, "gpt-4.1"): D("10.00")}  # the cache hit billed 0
    save_invoice(seeded, "openai", "openai", "a", [
        InvoiceLine(DAY2, "gpt-4.1", D("2.00"), "USD"),
        InvoiceLine(DAY2, "gpt-4.1", D("8.00"), "USD"),
        InvoiceLine(DAY3, "gpt-4.1", D("0.50"), "USD"),
    ])  # fmt: skip
    invoice = invoice_totals(load_invoice(seeded, "openai", DAY2, DAY3))
    matches = reconcile(ledger, invoice, currency, Threshold(D("0.01")))
    assert [(m.day, m.difference, m.flagged) for m in matches] == [
        (DAY2, D(0), False),
        (DAY3, D("-0.50"), True),
    ]
    assert flagged(reconcile(ledger, invoice, currency, Threshold(D("0.50")))) == []


def test_a_reimport_replaces_the_days_it_covers(seeded):
    save_invoice(seeded, "openai", "openai", "a", [InvoiceLine(DAY2, "gpt-4.1", D(4), "USD")])
    save_invoice(seeded, "openai", "openai", "b", [InvoiceLine(DAY2, "gpt-4.1", D(10), "USD")])
    assert [x.amount for x in load_invoice(seeded, "openai", DAY2, DAY2)] == [D(10)]
