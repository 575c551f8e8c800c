from __future__ import annotations

import datetime as dt

from dashboard.filters import (
    MAX_SPAN_DAYS,
    Filters,
    clamp,
    default_filters,
    fitted_default,
    from_query_params,
    to_query_params,
)

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


FIRST = dt.date(2026, 6, 1)  # the ledger's first request


def test_a_range_from_1900_is_clamped_to_the_ledgers_first_day_with_a_note():
    asked = from_query_params({"from": "1900-01-01", "to": TODAY.isoformat()}, TODAY)
    clamped, note = clamp(asked, FIRST, TODAY, TODAY)
    assert (clamped.start, clamped.end) == (FIRST, TODAY)
    assert note == "The date range starts 2026-06-01, the day of the ledger's first request."


def test_a_range_never_spans_more_than_the_maximum():
    asked = Filters(dt.date(1900, 1, 1), TODAY, apps=("search",))
    clamped, note = clamp(asked, dt.date(2020, 1, 1), TODAY, TODAY)
    assert clamped.days == MAX_SPAN_DAYS == 400 and clamped.end == TODAY
    assert clamped.apps == ("search",)  # the other filters are kept
    assert note is not None and f"at most {MAX_SPAN_DAYS} days" in note


def test_the_end_stops_at_today_and_a_future_range_becomes_today():
    clamped, note = clamp(Filters(TODAY, dt.date(2999, 1, 1)), FIRST, TODAY, TODAY)
    assert (clamped.start, clamped.end) == (TODAY, TODAY)
    assert note is not None and "ends 2026-11-29" in note
    # rows stamped after today (a clock ahead) stay reachable
    later = TODAY + dt.timedelta(days=1)
    assert clamp(Filters(TODAY, later), FIRST, later, TODAY)[0].end == later


def test_ranges_inside_the_data_and_default_views_of_a_young_ledger_are_kept():
    inside = Filters(dt.date(2026, 11, 1), dt.date(2026, 11, 7))
    assert clamp(inside, FIRST, TODAY, TODAY) == (inside, None)
    # three days of data: the default 30-day view keeps its length and says nothing
    young = default_filters(TODAY)
    assert clamp(young, TODAY - dt.timedelta(days=2), TODAY, TODAY) == (young, None)
    # but a year back on that ledger is cut to the default length
    year = Filters(TODAY - dt.timedelta(days=365), TODAY)
    clamped, note = clamp(year, TODAY - dt.timedelta(days=2), TODAY, TODAY)
    assert clamped == young
    assert note == (
        "The date range starts 2026-10-31, 30 days back (the ledger's first request is "
        "from 2026-11-27)."
    )


def test_an_empty_ledger_keeps_the_default_length():
    clamped, note = clamp(Filters(dt.date(1900, 1, 1), TODAY), None, None, TODAY)
    assert clamped == default_filters(TODAY)
    assert note is not None and "no requests yet" in note


def test_the_team_scope_never_comes_from_the_url():
    f = from_query_params({"team": "a", "team_scope": "b"}, TODAY)
    assert f.teams == ("a",) and f.team_scope is None
    assert "team_scope" not in to_query_params(Filters(TODAY, TODAY, team_scope="b"))


def test_the_endpoint_filter_travels_in_the_url():
    f = Filters(dt.date(2026, 11, 1), dt.date(2026, 11, 7), endpoints=("embeddings", "responses"))
    params = to_query_params(f)
    assert params["endpoint"] == "embeddings,responses"
    assert from_query_params(params, TODAY) == f


NOW = dt.datetime(2026, 11, 29, 14, 37, 12, tzinfo=dt.UTC)


def test_a_young_ledger_is_shown_in_minutes_from_its_first_request_to_now():
    f = fitted_default(NOW - dt.timedelta(minutes=25), NOW)
    assert f.grain == "minute" and f.freq == "min"
    assert f.start_at == dt.datetime(2026, 11, 29, 14, 12, tzinfo=dt.UTC)
    assert f.end_at == dt.datetime(2026, 11, 29, 14, 42, tzinfo=dt.UTC)  # now, rounded up
    assert f.end_at > NOW
    assert f.previous.end_at == f.start_at
    assert f.previous.end_at - f.previous.start_at == f.end_at - f.start_at
    assert "14:12" in f.label()


def test_hours_for_a_ledger_of_a_day_days_for_an_older_one_never_empty_days_before_it():
    day_old = fitted_default(NOW - dt.timedelta(hours=20), NOW)
    assert day_old.since is None and day_old.grain == "hour"
    assert (day_old.start, day_old.end) == (dt.date(2026, 11, 28), NOW.date())
    ten_days = fitted_default(NOW - dt.timedelta(days=10), NOW)
    assert ten_days.grain == "day" and ten_days.start == dt.date(2026, 11, 19)
    old = fitted_default(NOW - dt.timedelta(days=90), NOW)
    assert old == default_filters(NOW.date()) and old.days == 30
    assert fitted_default(None, NOW) == default_filters(NOW.date())


def test_the_data_window_is_kept_only_when_the_url_names_no_dates():
    default = fitted_default(NOW - dt.timedelta(minutes=5), NOW)
    assert from_query_params({}, NOW.date(), default).grain == "minute"
    assert from_query_params({"app": "a"}, NOW.date(), default).since == default.since
    picked = from_query_params({"from": "2026-11-29"}, NOW.date(), default)
    assert picked.since is None and picked.grain == "hour"
    assert "from" not in to_query_params(default)
    assert clamp(default, NOW.date(), NOW.date(), NOW.date()) == (default, None)


def test_end_user_and_tag_filters_round_trip_through_the_url():
    from dashboard.filters import from_query_params, to_query_params

    today = dt.date(2026, 11, 30)
    params = {"from": "2026-11-01", "to": "2026-11-29", "user": "bob,alice",
              "tag_key": "tier", "tag": "gold,silver"}  # fmt: skip
    f = from_query_params(params, today)
    assert (f.end_users, f.tag_key, f.tag_values) == (("alice", "bob"), "tier", ("gold", "silver"))
    assert f.attributed and f.tag_filter
    assert to_query_params(f) == {**params, "user": "alice,bob"}
    bare = from_query_params({"tag_key": "tier"}, today)
    assert not bare.tag_filter and not bare.attributed
    assert "tag_key" not in to_query_params(bare)


def test_views_say_which_filters_they_cannot_apply():
    from dashboard.filters import (
        CUBE_FILTERS,
        SESSION_ROLLUP_FILTERS,
        TAG_ROLLUP_FILTERS,
        USER_ROLLUP_FILTERS,
        Filters,
        ignored_by,
        ignored_note,
    )

    f = Filters(
        start=dt.date(2026, 11, 1),
        end=dt.date(2026, 11, 2),
        models=("m",),
        endpoints=("embeddings",),
        end_users=("u",),
        tag_key="k",
        tag_values=("v",),
    )
    assert ignored_by(f, CUBE_FILTERS) == ("end user", "tag")
    assert ignored_by(f, USER_ROLLUP_FILTERS) == ("model", "tag")
    assert ignored_by(f, SESSION_ROLLUP_FILTERS) == ("model", "endpoint", "tag")
    assert ignored_by(f, TAG_ROLLUP_FILTERS) == ("model", "end user")
    assert ignored_note(f, CUBE_FILTERS, "this page") == (
        "The end user and tag filters do not apply to this page: it shows every end user "
        "and tag."
    )
    assert ignored_note(Filters(start=f.start, end=f.end), CUBE_FILTERS) is None
