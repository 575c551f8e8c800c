"""The exhaustion forecast and burn-down of a budget, at its average pace (pure)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from gateway.domain.budget_forecast import SpendPoint, burn_down, forecast_exhaustion

START = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
END = START + dt.timedelta(days=1)


def at(hours: float) -> dt.datetime:
    return START + dt.timedelta(hours=hours)


def test_a_budget_spent_at_a_steady_pace_runs_out_when_the_pace_says() -> None:
    # $2 in 6 hours against $10: $1/3 per hour, the rest ($8) in 24 more hours: not today
    points = [SpendPoint(at(3), Decimal(1)), SpendPoint(at(6), Decimal(2))]
    f = forecast_exhaustion(Decimal(10), points, START, END, at(6))
    assert f.exhausted_at is None and not f.already_exhausted
    assert f.projected_end_usd == Decimal(8)
    assert f.remaining_usd == Decimal(8)
    # against $4: the remaining $2 takes 6 more hours, at noon
    f = forecast_exhaustion(Decimal(4), points, START, END, at(6))
    assert f.exhausted_at == at(12)
    assert f.rate_usd_per_hour.quantize(Decimal("0.0001")) == Decimal("0.3333")


def test_a_budget_already_spent_shows_when_it_crossed_its_limit() -> None:
    points = [
        SpendPoint(at(1), Decimal(1)),
        SpendPoint(at(2), Decimal(3)),
        SpendPoint(at(5), Decimal(4)),
    ]
    f = forecast_exhaustion(Decimal(3), points, START, END, at(5))
    assert f.already_exhausted and f.exhausted_at == at(2)
    assert f.remaining_usd == 0


def test_nothing_spent_never_runs_out_and_a_zero_budget_runs_out_at_the_first_cent() -> None:
    f = forecast_exhaustion(Decimal(5), [], START, END, at(10))
    assert f.exhausted_at is None and f.rate_usd_per_hour == 0 and f.projected_end_usd == 0
    f = forecast_exhaustion(Decimal(0), [SpendPoint(at(4), Decimal("0.01"))], START, END, at(5))
    assert f.already_exhausted and f.exhausted_at == at(4)


def test_at_the_period_start_there_is_no_pace_yet() -> None:
    f = forecast_exhaustion(Decimal(5), [], START, END, START)
    assert f.rate_usd_per_hour == 0 and f.exhausted_at is None


def test_a_period_must_end_after_it_starts() -> None:
    with pytest.raises(ValueError):
        forecast_exhaustion(Decimal(5), [], END, START, START)


def test_burn_down_starts_at_the_full_limit_and_may_go_below_zero() -> None:
    points = [SpendPoint(at(2), Decimal(3)), SpendPoint(at(4), Decimal(12))]
    assert burn_down(Decimal(10), points, START) == [
        (START, Decimal(10)),
        (at(2), Decimal(7)),
        (at(4), Decimal(-2)),
    ]
