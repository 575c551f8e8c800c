from __future__ import annotations

import datetime as dt

from dashboard.filters import Filters, default_filters, from_query_params, to_query_params

TODAY = dt.date(2026, 11, 29)


def test_url_round_trip_keeps_every_filter():
    f = Filters(dt.date(2026, 11, 1), dt.date(2026, 11, 7), apps=("a", "b"), providers=("relay",))
    params = to_query_params(f)
    assert params == {"from": "2026-11-01", "to": "2026-11-07", "app": "a,b", "provider": "relay"}
    assert from_query_params(params, TODAY) == f


def test_missing_or_malformed_params_take_defaults():
    assert from_query_params({}, TODAY) == default_filters(TODAY)
    f = from_query_params({"from": "yesterday", "model": ["x", "y", "x"]}, TODAY)
    assert f.start == default_filters(TODAY).start and f.models == ("x", "y")


def test_reversed_dates_are_swapped():
    f = from_query_params({"from": "2026-11-10", "to": "2026-11-01"}, TODAY)
    assert (f.start, f.end) == (dt.date(2026, 11, 1), dt.date(2026, 11, 10))


def test_period_bounds_are_utc_midnights_and_previous_period_is_adjacent():
    f = Filters(dt.date(2026, 11, 8), dt.date(2026, 11, 14))
    assert f.start_at == dt.datetime(2026, 11, 8, tzinfo=dt.UTC)
    assert f.end_at == dt.datetime(2026, 11, 15, tzinfo=dt.UTC)
    assert (f.previous.start, f.previous.end) == (dt.date(2026, 11, 1), dt.date(2026, 11, 7))
    assert f.days == 7 and f.grain == "day"
    assert Filters(TODAY, TODAY).grain == "hour"
    assert "UTC" in f.label()
