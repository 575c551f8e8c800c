"""Budget periods on the UTC calendar, refusal wording, and what a budget may be."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from gateway.domain.budgets import (
    Budget,
    BudgetPeriod,
    BudgetScope,
    parse_alert_at,
    period_window,
)

UTC = dt.UTC


@pytest.mark.parametrize(
    ("period", "now", "start", "end"),
    [
        (
            BudgetPeriod.DAY,
            dt.datetime(2026, 12, 1, 23, 59, tzinfo=UTC),
            (2026, 12, 1),
            (2026, 12, 2),
        ),
        # Tuesday 1 Dec 2026 -> the week from Monday 30 Nov
        (
            BudgetPeriod.WEEK,
            dt.datetime(2026, 12, 1, 10, tzinfo=UTC),
            (2026, 11, 30),
            (2026, 12, 7),
        ),
        (
            BudgetPeriod.WEEK,
            dt.datetime(2026, 11, 30, 0, tzinfo=UTC),
            (2026, 11, 30),
            (2026, 12, 7),
        ),
        (
            BudgetPeriod.MONTH,
            dt.datetime(2026, 12, 31, 23, tzinfo=UTC),
            (2026, 12, 1),
            (2027, 1, 1),
        ),
        (BudgetPeriod.MONTH, dt.datetime(2028, 2, 29, tzinfo=UTC), (2028, 2, 1), (2028, 3, 1)),
    ],
)
def test_periods_follow_the_utc_calendar(
    period: BudgetPeriod,
    now: dt.datetime,
    start: tuple[int, int, int],
    end: tuple[int, int, int],
) -> None:
    assert period_window(period, now) == (
        dt.datetime(*start, tzinfo=UTC),
        dt.datetime(*end, tzinfo=UTC),
    )


def test_a_local_time_is_placed_in_its_utc_day() -> None:
    tokyo = dt.timezone(dt.timedelta(hours=9))
    start, _ = period_window(BudgetPeriod.DAY, dt.datetime(2026, 12, 2, 8, tzinfo=tokyo))
    assert start == dt.datetime(2026, 12, 1, tzinfo=UTC)
    with pytest.raises(ValueError):
        period_window(BudgetPeriod.DAY, dt.datetime(2026, 12, 2))


def test_the_refusal_names_scope_period_and_limit_only() -> None:
    b = Budget(7, BudgetScope.APP, "shop", BudgetPeriod.DAY, Decimal("0.02"), True)
    assert b.describe() == "the daily budget of $0.02 on app 'shop'"
    whole = Budget(8, BudgetScope.ALL, "", BudgetPeriod.MONTH, Decimal(5), True)
    assert whole.describe() == "the monthly budget of $5.00 on the whole gateway"
    fine = Budget(9, BudgetScope.TEAM, "t", BudgetPeriod.WEEK, Decimal("0.0000001"), True)
    assert "$0.0000001" in fine.describe()


@pytest.mark.parametrize(
    ("scope", "value", "limit"),
    [
        (BudgetScope.ALL, "x", Decimal(1)),
        (BudgetScope.APP, " ", Decimal(1)),
        (BudgetScope.APP, "a", Decimal(-1)),
        (BudgetScope.APP, "a", Decimal("Infinity")),
    ],
)
def test_an_impossible_budget_is_refused(scope: BudgetScope, value: str, limit: Decimal) -> None:
    with pytest.raises(ValueError):
        Budget(1, scope, value, BudgetPeriod.DAY, limit, True)


def test_alert_thresholds_parse_sorted_and_checked() -> None:
    assert parse_alert_at("100, 50,80,50") == (50, 80, 100)
    for bad in ("x", "0", "50,2000"):
        with pytest.raises(ValueError):
            parse_alert_at(bad)
