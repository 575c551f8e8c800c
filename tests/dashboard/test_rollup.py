from __future__ import annotations

import datetime as dt

import pandas as pd

from dashboard import aggregations as agg
from dashboard.rollup import LedgerRollup
from tests.dashboard.records import frame, record

DAY = dt.date(2026, 11, 1)


class FakeLedger:
    """Answers fetches from in-memory records and remembers what was asked."""

    def __init__(self, records):
        self.records = records
        self.calls: list[tuple[dt.datetime, dt.datetime]] = []

    def __call__(self, start, end):
        self.calls.append((start, end))
        inside = [r for r in self.records if start <= r.started_at < end]
        return agg.records_to_cube(frame(inside), "day") if inside else agg.empty_cube(), (
            agg.empty_histogram()
        )


def at(day: int, hour: int = 12):
    return dt.datetime(2026, 11, day, hour, tzinfo=dt.UTC)


def test_missing_days_are_fetched_once_in_one_span():
    ledger = FakeLedger([record(started_at=at(d)) for d in (1, 2, 3, 5)])
    rollup = LedgerRollup(ledger)
    cube, _ = rollup.days(DAY, DAY + dt.timedelta(days=4))
    assert cube["requests"].sum() == 4
    assert ledger.calls == [(at(1, 0), at(6, 0))]
    cube, _ = rollup.days(DAY + dt.timedelta(days=1), DAY + dt.timedelta(days=6))
    assert cube["requests"].sum() == 3  # days 2, 3 and 5; 6 and 7 are empty
    assert ledger.calls[1:] == [(at(6, 0), at(8, 0))]  # only the days not held yet


def test_stale_days_are_served_and_refreshed_in_the_background():
    now = [0.0]
    ledger = FakeLedger([record(started_at=at(1))])
    rollup = LedgerRollup(ledger, ttl_s=60, clock=lambda: now[0])
    assert rollup.days(DAY, DAY)[0]["requests"].sum() == 1
    ledger.records.append(record(started_at=at(1, 13)))  # a late row (spool replay)
    now[0] = 61
    assert rollup.days(DAY, DAY)[0]["requests"].sum() == 1  # the old copy, no waiting
    rollup.wait(5)
    assert rollup.days(DAY, DAY)[0]["requests"].sum() == 2


def test_warm_fetches_in_the_background():
    ledger = FakeLedger([record(started_at=at(2))])
    rollup = LedgerRollup(ledger)
    rollup.warm(DAY, DAY + dt.timedelta(days=2))
    rollup.wait(5)
    assert len(ledger.calls) == 1
    assert isinstance(rollup.days(DAY, DAY + dt.timedelta(days=2))[0], pd.DataFrame)
    assert len(ledger.calls) == 1
