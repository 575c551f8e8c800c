"""The savings split: steps that add up to the headline, exactly and in cents."""

from __future__ import annotations

import random
from decimal import Decimal
from functools import reduce
from pathlib import Path

from gateway.domain.config import load_config
from gateway.domain.pricing import PriceCatalog, TokenUsage
from gateway.finance.savings import (
    STEPS,
    LedgerSums,
    Savings,
    add,
    decompose,
    record_sums,
    to_cents,
)

CONFIG = Path(__file__).resolve().parents[3] / "config" / "costgate.example.yaml"
D = Decimal


def test_the_worked_example_of_the_docs_relay_gpt_4_1_saves_86_3_percent():
    # 1M output tokens of gpt-4.1 ($8.00 at list) through the relay, ¥1 per $1, ¥7.3 per $1
    catalog = PriceCatalog.from_config(load_config(CONFIG))
    priced = catalog.price("relay-gpt-4.1", TokenUsage(completion_tokens=1_000_000))
    assert priced.list_cost_usd == D("8.0000000000")
    assert priced.actual_cost == D("8.0000000000")  # ¥
    assert priced.actual_cost_usd == D("1.0958904110")
    s = decompose(record_sums(priced.list_cost_usd, priced.actual_cost_usd, None, None, False))
    assert s.no_costgate_usd == D("8")
    assert s.saved_usd == D("6.9041095890")
    assert s.steps == {
        "routing": 0,
        "cached_tokens": 0,
        "provider_price_fx": D("6.9041095890"),
        "batch_discount": 0,
        "cache_hits": 0,
    }
    assert s.saved_pct is not None and round(s.saved_pct, 1) == D("86.3")


def test_routing_cached_tokens_and_provider_steps_of_one_aliased_request():
    # `auto` served by deepseek-v3.2 against the gpt-4.1 baseline, half the prompt cached
    catalog = PriceCatalog.from_config(load_config(CONFIG))
    usage = TokenUsage(prompt_tokens=10_000, cached_prompt_tokens=5_000, completion_tokens=1_000)
    p = catalog.price("deepseek-v3.2", usage, baseline_model="gpt-4.1")
    assert p.baseline_cost_usd is not None
    cached = D(5_000) * (D("0.28") - D("0.028")) / D(1_000_000)
    s = decompose(
        record_sums(p.list_cost_usd, p.actual_cost_usd, p.baseline_cost_usd, cached, False)
    )
    # gpt-4.1: 5k × 2.00 + 5k × 0.50 + 1k × 8.00 = $0.0205; deepseek: 0.0014 + 0.00014 + 0.00042
    assert p.baseline_cost_usd == D("0.0205000000")
    assert p.list_cost_usd == D("0.0019600000")
    assert s.steps["routing"] == D("0.0185400000")
    assert s.steps["cached_tokens"] == D("0.00126")
    assert s.steps["provider_price_fx"] == 0  # DeepSeek itself bills its list price
    assert s.no_costgate_usd == p.baseline_cost_usd + cached
    assert s.saved_usd == sum(s.steps.values())


def test_a_cache_hit_saves_its_whole_list_cost_and_no_provider_price():
    s = decompose(record_sums(D("0.5"), D(0), D("0.9"), D("0.1"), True))
    assert s.steps == {
        "routing": D("0.4"),
        "cached_tokens": D("0.1"),
        "provider_price_fx": D(0),
        "batch_discount": D(0),
        "cache_hits": D("0.5"),
    }
    assert s.billed_usd == 0
    assert s.no_costgate_usd == D("1.0")


def test_a_relay_dearer_than_list_shows_a_negative_step():
    s = decompose(record_sums(D("1.00"), D("1.25"), None, None, False))
    assert s.steps["provider_price_fx"] == D("-0.25")
    assert s.saved_usd == D("-0.25")


def test_unpriced_rows_take_no_part():
    nothing = record_sums(None, None, D("3"), D("1"), False)
    s = decompose(nothing)
    assert s.no_costgate_usd == 0 and s.billed_usd == 0 and s.saved_pct is None
    assert all(v == 0 for v in s.steps.values())


def _random_rows(rng: random.Random, n: int) -> list[LedgerSums]:
    def money() -> Decimal:
        return D(rng.randrange(0, 10**9)).scaleb(-10)  # up to $0.1, 10 decimal places

    rows = []
    for _ in range(n):
        lst = money()
        hit = rng.random() < 0.1
        billed = D(0) if hit else lst * D(rng.choice(["1", "0.137", "1.3", "0.5"]))
        billed = billed.quantize(D("1E-10"))
        baseline = None if rng.random() < 0.3 else lst + money() - money() / 2
        cached = (money() / 3).quantize(D("1E-10")) if rng.random() < 0.5 else None
        rows.append(record_sums(lst, billed, baseline, cached, hit))
    return rows


def test_steps_add_up_to_the_headline_exactly_and_in_cents_on_random_ledgers():
    rng = random.Random(14)
    for _ in range(200):
        rows = _random_rows(rng, rng.randrange(1, 60))
        s = decompose(reduce(add, rows))
        assert s.saved_usd == sum(s.steps.values())
        c = s.in_cents()
        assert c.no_costgate_usd == to_cents(s.no_costgate_usd)
        assert c.saved_usd == to_cents(s.saved_usd)  # the headline, rounded once
        assert sum(c.steps.values()) == c.saved_usd  # to the cent
        assert abs(c.billed_usd - to_cents(s.billed_usd)) <= D("0.01")
        for name in STEPS:  # each rounded step is within a cent of its exact value
            assert abs(c.steps[name] - s.steps[name]) <= D("0.01")


def test_a_batch_line_saves_list_minus_billed_as_its_batch_discount():
    # 1M gpt-4o-mini output tokens: $0.60 at list, $0.30 at OpenAI's batch rate
    s = decompose(record_sums(D("0.6"), D("0.3"), None, None, False, batch=True))
    assert s.steps["batch_discount"] == D("0.3")
    assert s.steps["provider_price_fx"] == 0
    assert s.saved_usd == D("0.3") == sum(s.steps.values())


def test_cents_where_naive_rounding_of_each_step_would_not_add_up():
    # four steps of 0.3 cent (and no batch): each rounds to 0, their sum (1.2 cents) to 1
    s = Savings(D("1.012"), D("1.000"),
                dict.fromkeys(STEPS, D("0.003")) | {"batch_discount": D(0)})
    assert [to_cents(v) for v in s.steps.values()] == [D("0.00")] * 5
    c = s.in_cents()
    assert c.saved_usd == D("0.01")
    assert sum(c.steps.values()) == D("0.01")
