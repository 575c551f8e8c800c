from __future__ import annotations

import datetime as dt
from decimal import Decimal

from dashboard.forecast import month_end, month_end_forecast

NOON_15TH = dt.datetime(2026, 11, 15, 12, 0, tzinfo=dt.UTC)


def test_month_end_is_midnight_after_the_last_day():
    assert month_end(NOON_15TH) == dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
    assert month_end(dt.datetime(2028, 2, 3, tzinfo=dt.UTC)) == dt.datetime(
        2028, 3, 1, tzinfo=dt.UTC
    )


def test_forecast_adds_burn_rate_times_what_is_left_of_the_month():
    spend = {dt.date(2026, 11, d): Decimal(10) for d in range(1, 15)}
    spend[dt.date(2026, 11, 15)] = Decimal(4)  # today so far
    fc = month_end_forecast(spend, NOON_15TH)
    assert fc.month_to_date_usd == Decimal(144)
    assert fc.burn_rate_usd_per_day == Decimal(10)
    assert fc.days_left == Decimal("15.5")
    assert fc.forecast_usd == Decimal(144) + Decimal(155)
    assert fc.basis_days == 7


def test_burn_rate_uses_last_complete_days_across_the_month_boundary():
    spend = {dt.date(2026, 10, 31): Decimal(70), dt.date(2026, 11, 1): Decimal(0)}
    fc = month_end_forecast(spend, dt.datetime(2026, 11, 2, 0, 0, tzinfo=dt.UTC))
    assert fc.basis_days == 2  # the ledger starts on Oct 31
    assert fc.burn_rate_usd_per_day == Decimal(35)
    assert fc.month_to_date_usd == Decimal(0)


def test_young_ledger_extrapolates_today_over_the_hours_elapsed():
    fc = month_end_forecast({NOON_15TH.date(): Decimal(5)}, NOON_15TH)
    assert fc.basis_days == 0
    assert fc.burn_rate_usd_per_day == Decimal(10)


def test_no_spend_forecasts_zero():
    fc = month_end_forecast({}, NOON_15TH)
    assert fc.forecast_usd == 0 and fc.month_to_date_usd == 0


def test_unknown_days_are_left_out():
    fc = month_end_forecast(
        {dt.date(2026, 11, 14): None, dt.date(2026, 11, 13): Decimal(7)}, NOON_15TH
    )
    assert fc.month_to_date_usd == Decimal(7)
