"""The cube: built from raw records, sliced by time, rolled up by period."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from dashboard.cube import between, dsum, records_to_cube
from dashboard.spend import over_time, totals
from tests.dashboard.support.records import T0, frame, record


def test_weekly_and_monthly_rollups_keep_the_total():
    recs = [
        record(started_at=T0 + dt.timedelta(days=d), actual_cost_usd=Decimal(d + 1))
        for d in range(40)
    ]
    cube = records_to_cube(frame(recs), "day")
    for freq in ("D", "W", "MS"):
        series = over_time(cube, freq)
        assert dsum(series["actual_cost_usd"]) == sum(Decimal(d + 1) for d in range(40))
    weeks = over_time(cube, "W")["period"]
    assert all(p.weekday() == 0 for p in weeks)  # ISO weeks start on Monday
    months = over_time(cube, "MS")["period"].dt.strftime("%Y-%m").tolist()
    assert months == ["2026-11", "2026-12"]


def test_hourly_grain_buckets_by_hour():
    recs = [record(started_at=T0 + dt.timedelta(minutes=m)) for m in (0, 59, 61)]
    cube = records_to_cube(frame(recs), "hour")
    assert sorted(cube["requests"].tolist()) == [1, 2]


def test_between_selects_half_open_range():
    recs = [record(started_at=T0 + dt.timedelta(days=d)) for d in range(3)]
    cube = records_to_cube(frame(recs), "day")
    day = dt.datetime(2026, 11, 3, tzinfo=dt.UTC)
    assert totals(between(cube, day, day + dt.timedelta(days=1))).requests == 1


def test_dsum_skips_none_and_nan():
    assert dsum([None, float("nan"), Decimal("1.5")]) == Decimal("1.5")
    assert dsum([None]) is None
