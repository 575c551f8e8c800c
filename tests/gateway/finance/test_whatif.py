"""What-if re-pricing on hand-computed figures (list prices per 1M tokens from the config:
gpt-4.1 $2.00 in / $8.00 out; deepseek-v3.2 $0.28 / $0.42; the relay bills ¥1 per $1 of
list price at ¥7.3 per $1, and its DeepSeek at its own table, ¥2.50 / ¥3.80)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from gateway.domain.pricing import Rates
from gateway.finance.ledger_groups import Tokens
from gateway.finance.whatif import (
    PriceSheet,
    Scenario,
    UnpricedModel,
    parse_weights,
    reprice,
    summarize,
)
from tests.gateway.finance.conftest import group

M = 1_000_000
D = Decimal


@pytest.fixture
def lookup(catalog):
    return lambda model, day: catalog.versions.get(model)


def totals(rows):
    return summarize(rows, "total")["total"]


def test_the_ledgers_own_mix_reprices_to_the_ledger(catalog, lookup):
    g = group(catalog, "deepseek-v3.2", Tokens(input=M, output=M), alias="auto")
    assert totals(reprice([g], Scenario(), lookup)) == (D("0.70"), D("0.70"))


def test_another_routing_mix_splits_the_aliases_tokens_by_weight(catalog, lookup):
    g = group(catalog, "deepseek-v3.2", Tokens(input=M, output=M), alias="auto")
    scenario = Scenario(routing={"auto": {"gpt-4.1": D(1), "deepseek-v3.2": D(1)}})
    rows = reprice([g], scenario, lookup)
    by_model = summarize(rows, "model")
    # half on gpt-4.1: 0.5 × 2.00 + 0.5 × 8.00 = 5.00; half on DeepSeek: 0.35
    assert by_model["gpt-4.1"] == (D(0), D("5.00"))
    assert by_model["deepseek-v3.2"] == (D("0.70"), D("0.35"))
    assert totals(rows) == (D("0.70"), D("5.35"))


def test_a_group_outside_the_alias_keeps_its_model(catalog, lookup):
    g = group(catalog, "gpt-4.1", Tokens(input=M), alias=None)
    scenario = Scenario(routing={"auto": {"deepseek-v3.2": D(1)}})
    assert totals(reprice([g], scenario, lookup)) == (D("2.00"), D("2.00"))


def test_another_model_reuses_the_token_counts(catalog, lookup):
    g = group(catalog, "relay-gpt-4.1", Tokens(input=M, output=M))
    assert g.actual_cost_usd == D("1.3698630137")  # ¥10 at 7.3
    rows = reprice([g], Scenario(swaps={"relay-gpt-4.1": "relay-deepseek-v3.2"}), lookup)
    # ¥2.50 + ¥3.80 = ¥6.30 at 7.3 = $0.8630136986
    assert totals(rows) == (D("1.3698630137"), D("0.8630136986"))


def test_a_providers_fx_or_multiplier_reprices_its_bills(catalog, lookup):
    g = group(catalog, "relay-gpt-4.1", Tokens(input=M, output=M))
    fx = Scenario(prices=PriceSheet(fx_per_usd={"relay": D("6.3")}))
    assert totals(reprice([g], fx, lookup))[1] == D("1.5873015873")  # ¥10 / 6.3
    half = Scenario(prices=PriceSheet(multipliers={"relay": D("0.5")}))
    assert totals(reprice([g], half, lookup))[1] == D("0.6849315068")  # ¥5 / 7.3


def test_a_models_list_prices_reprice_a_provider_that_bills_list(catalog, lookup):
    g = group(catalog, "gpt-4.1", Tokens(input=M, output=M), app="bot")
    sheet = PriceSheet(list_prices={"gpt-4.1": Rates(input=D(1), output=D(4))})
    rows = reprice([g], Scenario(prices=sheet), lookup)
    assert summarize(rows, "app") == {"bot": (D("10.00"), D("5.00"))}


def test_cache_hits_cost_nothing_in_any_scenario(catalog, lookup):
    g = group(catalog, "gpt-4.1", Tokens(input=M), cache_hit=True)
    rows = reprice([g], Scenario(swaps={None: "relay-gpt-4.1"}), lookup)
    assert totals(rows) == (D(0), D(0))


def test_a_model_without_a_stored_price_is_refused(catalog, lookup):
    g = group(catalog, "gpt-4.1", Tokens(input=M))
    with pytest.raises(UnpricedModel):
        reprice([g], Scenario(swaps={None: "gpt-7"}), lookup)


def test_weights_parse_and_refuse_nonsense():
    assert parse_weights("gpt-4.1=30, deepseek-v3.2=70") == {"gpt-4.1": 30, "deepseek-v3.2": 70}
    for bad in ("gpt-4.1", "a=-1", "a=0", "=3"):
        with pytest.raises(ValueError):
            parse_weights(bad)


def test_what_the_sums_cannot_price_stays_with_the_rows_model(catalog, lookup):
    # a 300k-token prompt on gemini-2.5-pro is priced at its long-prompt tier ($2.50 in,
    # $15.00 out) by the ledger; the group's sums know no tier: that part of the cost
    # stays with gemini-2.5-pro and the scenario moves only what it changes
    g = group(catalog, "gemini-2.5-pro", Tokens(input=300_000, output=100_000))
    assert g.actual_cost_usd == D("2.25")  # 0.3 × 2.50 + 0.1 × 15.00
    assert totals(reprice([g], Scenario(), lookup)) == (D("2.25"), D("2.25"))
    rows = reprice([g], Scenario(swaps={None: "gpt-4.1"}), lookup)
    # the tier's extra over the base rates (0.375 + 0.50) stays; gpt-4.1 adds 0.6 + 0.8
    assert summarize(rows, "model") == {
        "gemini-2.5-pro": (D("2.25"), D("0.875")),
        "gpt-4.1": (D(0), D("1.4")),
    }
