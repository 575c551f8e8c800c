"""The burn-down figure: what is left over the period, the forecast to exhaustion."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from dashboard.components.budget_chart import burn_down_figure
from gateway.domain.budget_forecast import SpendPoint, forecast_exhaustion

START = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
END = START + dt.timedelta(days=1)
NOW = START + dt.timedelta(hours=6)


def test_left_falls_with_spend_and_the_forecast_reaches_zero_when_it_runs_out() -> None:
    points = [SpendPoint(START + dt.timedelta(hours=3), Decimal(1))]
    fc = forecast_exhaustion(Decimal(3), points, START, END, NOW)  # $1 in 6 h: out at 18:00
    fig = burn_down_figure("#1", (START, END), points, fc, NOW)
    left, forecast = fig.data
    assert list(left.y) == [3.0, 2.0, 2.0]  # the start, the spend, flat until now
    assert list(forecast.x) == [NOW, START + dt.timedelta(hours=18)]
    assert forecast.y[0] == 2.0 and abs(forecast.y[1]) < 1e-9
    assert tuple(fig.layout.xaxis.range) == (START, END)


def test_a_spent_budget_has_no_forecast_line() -> None:
    points = [SpendPoint(START + dt.timedelta(hours=1), Decimal(5))]
    fc = forecast_exhaustion(Decimal(3), points, START, END, NOW)
    fig = burn_down_figure("#1", (START, END), points, fc, NOW)
    assert [t.name for t in fig.data] == ["left"]
    assert list(fig.data[0].y) == [3.0, -2.0, -2.0]
