"""Money figures: exact Decimal totals, unknown cost kept unknown, breakdowns, exports."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from dashboard.cube import dsum, empty_cube, records_to_cube
from dashboard.spend import (
    breakdown,
    comparison_table,
    export_frame,
    savings_split,
    totals,
)
from gateway.domain.usage_record import RequestStatus, UsageSource
from tests.dashboard.support.records import PV, T0, failed, frame, record

DISCOUNT = {PV: Decimal("0.252")}  # deepseek list input 0.28 − cached 0.028


def test_totals_sum_money_exactly_and_count_errors():
    cube = records_to_cube(
        frame([record(), record(actual_cost_usd=Decimal("0.0000000001")), failed()]),
        "day",
        DISCOUNT,
    )
    t = totals(cube)
    assert t.requests == 3
    assert t.errors == 1
    assert t.spend_usd == Decimal("0.0010000001")
    assert t.list_spend_usd == Decimal("0.0024")
    assert t.savings_usd == Decimal("0.0013999999")
    assert t.routing_savings_usd == Decimal("0.0176")
    assert t.tokens == 2200
    # 2 × 200 cached tokens × $0.252 per 1M
    assert t.cached_savings_usd == Decimal("0.0001008")
    assert t.unknown_cost_requests == 0  # a failed request is an error, not an unknown cost


def test_unknown_cost_is_none_never_zero():
    missing = record(
        usage_source=UsageSource.MISSING,
        prompt_tokens=None,
        completion_tokens=None,
        cached_prompt_tokens=None,
        actual_cost=None,
        actual_cost_usd=None,
        list_cost_usd=None,
        baseline_cost_usd=None,
    )
    t = totals(records_to_cube(frame([missing]), "day"))
    assert t.spend_usd is None
    assert t.savings_pct is None
    assert t.unknown_cost_requests == 1
    mixed = totals(records_to_cube(frame([missing, record()]), "day"))
    assert mixed.spend_usd == Decimal("0.001")
    assert mixed.unknown_cost_requests == 1


def test_savings_percent_is_against_list_cost_of_priced_rows():
    t = totals(records_to_cube(frame([record()]), "day"))
    assert t.savings_pct == Decimal("0.0002") * 100 / Decimal("0.0012")


def test_empty_cube_gives_zero_counts_and_unknown_money():
    t = totals(empty_cube())
    assert (t.requests, t.errors, t.tokens) == (0, 0, 0)
    assert t.spend_usd is None and t.error_rate is None
    assert breakdown(empty_cube(), "model").empty
    assert export_frame(empty_cube()).empty
    assert comparison_table(empty_cube()).empty


def test_breakdown_sorts_by_spend_and_shares_add_to_100():
    recs = [
        record(model="gpt-4.1", provider="openai", actual_cost_usd=Decimal("3")),
        record(model="deepseek-v3.2", actual_cost_usd=Decimal("1")),
        record(model="deepseek-v3.2", actual_cost_usd=Decimal("1")),
    ]
    b = breakdown(records_to_cube(frame(recs), "day"), "model")
    assert list(b["model"]) == ["gpt-4.1", "deepseek-v3.2"]
    assert list(b["spend_usd"]) == [Decimal(3), Decimal(2)]
    assert sum(b["share_pct"]) == 100


def test_comparison_table_gives_mix_price_and_savings_vs_baseline():
    recs = [
        record(
            model="deepseek-v3.2",
            prompt_tokens=600,
            completion_tokens=0,
            cached_prompt_tokens=0,
            actual_cost_usd=Decimal("0.6"),
            baseline_cost_usd=Decimal("6"),
        ),
        record(
            model="gemini-2.5-flash",
            provider="google",
            prompt_tokens=400,
            completion_tokens=0,
            cached_prompt_tokens=0,
            actual_cost_usd=Decimal("1"),
            baseline_cost_usd=Decimal("4"),
        ),
    ]
    table = comparison_table(records_to_cube(frame(recs), "day")).set_index("model")
    assert table.loc["deepseek-v3.2", "mix_pct"] == 60.0
    assert table.loc["deepseek-v3.2", "usd_per_1m_tokens"] == Decimal(1000)
    assert table.loc["gemini-2.5-flash", "savings_vs_baseline_pct"] == Decimal(75)
    assert set(table["month"]) == {"2026-11"}


def test_export_frame_is_day_by_app_model_provider_and_reconciles():
    recs = [
        record(),
        record(app="support-bot"),
        record(started_at=T0 + dt.timedelta(days=1)),
        failed(),
    ]
    cube = records_to_cube(frame(recs), "hour")
    out = export_frame(cube)
    assert list(out.columns[:6]) == ["day", "app", "team", "key_id", "model", "provider"]
    assert out["requests"].sum() == 4
    assert dsum(out["spend_usd"]) == totals(cube).spend_usd
    assert len(out) == 3


def test_the_savings_split_of_one_record_adds_up_to_its_headline():
    split = savings_split(records_to_cube(frame([record()]), "day", DISCOUNT))
    assert split.steps == {
        "routing": Decimal("0.0088"),
        "cached_tokens": Decimal("0.0000504"),
        "provider_price_fx": Decimal("0.0002"),
        "batch_discount": 0,  # no batch lines
        "cache_hits": 0,  # no response-cache hits
    }
    assert split.no_costgate_usd == Decimal("0.01") + Decimal("0.0000504")  # baseline + cached
    assert split.saved_usd == sum(split.steps.values())


def test_a_response_cache_hit_counts_its_list_price_as_cache_savings():
    hit = record(
        cache_hit=True,
        attempts=0,
        actual_cost=Decimal(0),
        actual_cost_usd=Decimal(0),
        cached_prompt_tokens=0,
    )
    cube = records_to_cube(frame([record(cached_prompt_tokens=0), hit]), "day", DISCOUNT)
    t = totals(cube)
    assert t.spend_usd == Decimal("0.0010000000")
    assert t.cache_savings_usd == Decimal("0.0012000000")  # the hit's whole list price
    # every savings figure has it: the total, its share, and the provider part without it
    assert t.savings_usd == Decimal("0.0014000000")
    assert t.provider_savings_usd == Decimal("0.0002000000")
    assert t.savings_pct == Decimal("0.0014") * 100 / Decimal("0.0024")
    steps = savings_split(cube).steps
    assert steps["provider_price_fx"] == Decimal("0.0002")
    assert steps["cache_hits"] == Decimal("0.0012")
    assert dsum(breakdown(cube, "model")["savings_usd"]) == Decimal("0.0014")


def test_cancelled_stream_counts_as_error_with_known_cost():
    rec = record(status=RequestStatus.CANCELLED, usage_source=UsageSource.ESTIMATED)
    t = totals(records_to_cube(frame([rec]), "day"))
    assert t.errors == 1 and t.estimated_requests == 1 and t.spend_usd == Decimal("0.001")


def test_a_failed_request_the_provider_may_have_billed_at_an_unknown_cost_is_counted():
    # a timeout whose prompt was counted (estimated) on a model without a price: billed,
    # at a cost we do not know; a failure without usage stays an error only
    billed = failed(error_class="timeout", http_status=504, prompt_tokens=40,
                    completion_tokens=0, usage_source=UsageSource.ESTIMATED)
    t = totals(records_to_cube(frame([billed, failed()]), "day"))
    assert t.errors == 2 and t.unknown_cost_requests == 1
