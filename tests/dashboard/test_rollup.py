from __future__ import annotations

import datetime as dt

import pandas as pd

from dashboard.cube import dsum, empty_cube, records_to_cube
from dashboard.latency import empty_histogram
from dashboard.rollup import LedgerRollup
from tests.dashboard.support.records import frame, record

DAY = dt.date(2026, 11, 1)


class FakeLedger:
    """Answers fetches from in-memory records and remembers what was asked."""

    def __init__(self, records):
        self.records = records
        self.calls: list[tuple[dt.datetime, dt.datetime]] = []

    def count(self, start, end):
        days: dict[dt.date, int] = {}
        for r in self.records:
            if start <= r.started_at < end:
                days[r.started_at.date()] = days.get(r.started_at.date(), 0) + 1
        return days

    def __call__(self, start, end):
        self.calls.append((start, end))
        inside = [r for r in self.records if start <= r.started_at < end]
        return records_to_cube(frame(inside), "day") if inside else empty_cube(), (
            empty_histogram()
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


def test_a_new_process_serves_stored_days_at_once_with_exact_money(tmp_path):
    from decimal import Decimal

    from dashboard.rollup import DayStore

    ledger = FakeLedger([record(started_at=at(d)) for d in (1, 2)])
    first = LedgerRollup(ledger, store=DayStore(tmp_path), count=ledger.count)
    cube, _ = first.days(DAY, DAY + dt.timedelta(days=1))
    assert len(ledger.calls) == 1

    # a restarted dashboard: same store, the same ledger rows, no fetch
    second_ledger = FakeLedger(list(ledger.records))
    second = LedgerRollup(second_ledger, store=DayStore(tmp_path), count=second_ledger.count)
    again, _ = second.days(DAY, DAY + dt.timedelta(days=1))
    assert second_ledger.calls == []
    assert again["requests"].sum() == cube["requests"].sum() == 2
    money = [c for c in again.columns if again[c].map(lambda v: isinstance(v, Decimal)).any()]
    assert money and all(dsum(again[c]) == dsum(cube[c]) for c in money)


def test_a_stored_day_whose_ledger_rows_changed_is_fetched_anew(tmp_path):
    from dashboard.rollup import DayStore

    store = DayStore(tmp_path)
    old = FakeLedger([record(started_at=at(1)), record(started_at=at(2))])
    LedgerRollup(old, store=store, count=old.count).days(DAY, DAY + dt.timedelta(days=1))
    # day 1 got a late row (a spool replay); day 2 is as stored
    ledger = FakeLedger(old.records + [record(started_at=at(1, 14))])
    rollup = LedgerRollup(ledger, store=store, count=ledger.count)
    cube, _ = rollup.days(DAY, DAY + dt.timedelta(days=1))
    assert cube["requests"].sum() == 3
    assert ledger.calls == [(at(1, 0), at(2, 0))]  # only day 1 went to the ledger
    emptied = FakeLedger([])
    cube, _ = LedgerRollup(emptied, store=store, count=emptied.count).days(DAY, DAY)
    assert cube["requests"].sum() == 0
