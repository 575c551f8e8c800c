"""The Customers page's and the tag breakdown's statements against real PostgreSQL: a
hand-made ledger whose every figure is worked out in the comments."""

from __future__ import annotations

import dataclasses
import datetime as dt
from decimal import Decimal

import pytest
import streamlit as st

from dashboard.access.end_users import IdView, pseudonym
from dashboard.customers import economics as econ
from dashboard.customers import queries as cq
from dashboard.customers import tags
from dashboard.filters import Filters
from tests.dashboard.support.ledger import insert_records
from tests.dashboard.support.records import failed, record

SECRET = "s" * 40
RANGE = Filters(start=dt.date(2026, 11, 1), end=dt.date(2026, 11, 14))  # 14 days


def at(day: int, hour: int = 10) -> dt.datetime:
    return dt.datetime(2026, 11, day, hour, tzinfo=dt.UTC)


def spent(usd: str, day: int, **kw: object):
    return record(started_at=at(day), actual_cost_usd=Decimal(usd), actual_cost=Decimal(usd), **kw)


@pytest.fixture
def ledger(database_url, ledger_engine, empty_usage, monkeypatch):
    monkeypatch.setenv("COSTGATE_DASHBOARD_SECRET", SECRET)
    st.cache_data.clear()
    st.cache_resource.clear()
    insert_records(
        ledger_engine,
        [
            # alice: Nov 1 $1.00 (search) + $0.50 (chat) in session s1; Nov 11 $3.00 in s2
            spent("1.00", 1, end_user="alice", session_id="s1",
                  tags={"tier": "gold", "feature": "chat"}),
            spent("0.50", 1, end_user="alice", session_id="s1", app="chat"),
            spent("3.00", 11, end_user="alice", session_id="s2"),
            # bob: $0.20 on Nov 3 and Nov 13, one session spanning both
            spent("0.20", 3, end_user="bob", session_id="s3"),
            spent("0.20", 13, end_user="bob", session_id="s3"),
            # carol: $2.00 on Nov 9 (no session); a failure on Nov 10 (no cost)
            spent("2.00", 9, end_user="carol", tags={"tier": "gold"}),
            failed(started_at=at(10), end_user="carol"),
            # no end user: only in the tag rollup
            spent("5.00", 5, tags={"tier": "silver"}),
            # out of range
            spent("9.00", 15, end_user="dave", session_id="s4", tags={"tier": "gold"}),
            record(
                started_at=dt.datetime(2026, 10, 31, 23, tzinfo=dt.UTC),
                actual_cost_usd=Decimal("9.00"),
                end_user="dave",
            ),
        ],
    )  # fmt: skip
    return database_url


def test_top_users_and_the_distribution_per_user_day(ledger):
    top = econ.top_users(cq.users(ledger, RANGE, IdView.CLEAR))
    assert list(top["end_user"]) == ["alice", "carol", "bob"]
    assert list(top["spend_usd"]) == [Decimal("4.50"), Decimal("2.00"), Decimal("0.40")]
    assert list(top["requests"]) == [3, 2, 2]
    assert top["share_pct"][0] == Decimal("4.50") * 100 / Decimal("6.90")
    s = econ.user_summary(
        cq.users(ledger, RANGE, IdView.CLEAR), cq.user_days(ledger, RANGE, IdView.CLEAR)
    )
    # user-days: alice Nov 1 (1.50, two apps), Nov 11 (3.00); bob 0.20 twice; carol Nov 9
    # (2.00) and Nov 10 (unknown): sorted known costs 0.20 0.20 1.50 2.00 3.00
    assert (s.end_users, s.spend_usd, s.user_days, s.priced_user_days) == (
        3, Decimal("6.90"), 6, 5,
    )  # fmt: skip
    assert (s.day_p50_usd, s.day_p90_usd, s.day_p99_usd, s.day_max_usd) == (
        Decimal("1.50"), Decimal("3.00"), Decimal("3.00"), Decimal("3.00"),
    )  # fmt: skip
    assert s.day_mean_usd == Decimal("1.38")


def test_an_end_user_filter_and_the_app_filter_apply(ledger):
    only = dataclasses.replace(RANGE, end_users=("bob", "carol"), apps=("search",))
    top = econ.top_users(cq.users(ledger, only, IdView.CLEAR))
    assert list(top["end_user"]) == ["carol", "bob"]
    chat = dataclasses.replace(RANGE, apps=("chat",))
    assert list(econ.top_users(cq.users(ledger, chat, IdView.CLEAR))["spend_usd"]) == [
        Decimal("0.50")
    ]


def test_ops_see_pseudonyms_and_cannot_filter_by_end_user(ledger):
    shown = cq.users(ledger, RANGE, IdView.PSEUDONYM)
    key = SECRET.encode()
    assert list(shown["end_user"]) == [pseudonym(u, key) for u in ("alice", "carol", "bob")]
    assert not {"alice", "bob", "carol"} & set(shown["end_user"])
    # a guessed id filters nothing for a role that does not see ids
    probe = dataclasses.replace(RANGE, end_users=("alice",))
    assert len(cq.users(ledger, probe, IdView.PSEUDONYM)) == 3
    assert set(cq.users(ledger, RANGE, IdView.NONE)["end_user"]) == {"(hidden)"}
    assert set(cq.sessions(ledger, RANGE, IdView.NONE)["end_user"]) == {"(hidden)"}


def test_cost_per_session(ledger):
    frame = cq.sessions(ledger, RANGE, IdView.CLEAR)
    s = econ.session_summary(frame)
    # s1 1.50 (2 requests, two apps), s2 3.00, s3 0.40 (two days)
    assert (s.sessions, s.priced_sessions) == (3, 3)
    assert s.mean_usd == Decimal("1.6333333333333333")  # 4.90 / 3, as PostgreSQL rounds it
    assert (s.p50_usd, s.p90_usd, s.max_usd) == (Decimal("1.50"), Decimal("3.00"), Decimal("3.00"))
    top = econ.top_sessions(frame)
    assert list(top["session_id"]) == ["s2", "s1", "s3"]
    assert list(top["requests"]) == [1, 2, 2]
    assert list(top["end_user"]) == ["alice", "alice", "bob"]


def test_fastest_growers_last_7_days_against_the_7_before(ledger):
    table = econ.growth_table(cq.growth(ledger, RANGE, IdView.CLEAR))
    # [Nov 1, Nov 8): alice 1.50, bob 0.20; [Nov 8, Nov 15): alice 3.00, bob 0.20, carol 2.00
    assert list(table["end_user"]) == ["carol", "alice"]
    assert list(table["increase_usd"]) == [Decimal("2.00"), Decimal("1.50")]
    assert list(table["increase_pct"]) == [None, Decimal(100)]


def test_margins_against_a_price_per_seat(ledger):
    revenue = econ.revenue_for_range(Decimal("60"), RANGE.days)  # $28 for 14 days
    assert revenue == Decimal(28)
    frame = cq.margins(ledger, RANGE, IdView.CLEAR, revenue=Decimal("2.00"))
    s = econ.margin_summary(frame)
    assert (s.end_users, s.with_revenue, s.losing) == (3, 3, 1)
    assert (s.revenue_usd, s.spend_usd, s.margin_usd) == (
        Decimal("6.00"), Decimal("6.90"), Decimal("-0.90"),
    )  # fmt: skip
    table = econ.margin_table(frame)
    assert list(table["end_user"]) == ["alice", "carol", "bob"]
    assert list(table["margin_usd"]) == [Decimal("-2.50"), Decimal("0.00"), Decimal("1.60")]
    losing = econ.margin_table(frame, losing_only=True)
    assert list(losing["end_user"]) == ["alice"]
    assert losing["margin_pct"][0] == Decimal("-125")


def test_margins_against_plans(ledger):
    plans = econ.parse_plans("end_user,plan\nalice,pro\nbob,free\nerin,pro\ncarol,vip\n")
    users, revenue, unpriced = econ.plan_revenue(
        plans, {"pro": Decimal(15), "free": Decimal(0)}, RANGE.days
    )
    assert unpriced == ("vip",)
    frame = cq.margins(ledger, RANGE, IdView.CLEAR, plan_users=users, plan_revenue=revenue)
    s = econ.margin_summary(frame)
    # pro: $15 a month is $7.00 for 14 days; carol's plan has no price, erin spent nothing
    assert (s.end_users, s.with_revenue, s.losing) == (3, 2, 1)
    assert (s.revenue_usd, s.spend_usd) == (Decimal("7.00"), Decimal("4.90"))
    table = econ.margin_table(frame)
    assert list(table["end_user"]) == ["bob", "alice"]
    assert list(table["margin_usd"]) == [Decimal("-0.40"), Decimal("2.50")]


def test_tag_breakdown_and_spend_of_a_tag_or_an_end_user(ledger):
    assert cq.tag_keys(ledger) == ["feature", "tier"]
    assert cq.tag_values(ledger, "tier") == ["gold", "silver"]
    daily = cq.tag_series(ledger, RANGE, "tier")
    table = tags.table(daily, "tag_value")
    assert list(table["tag_value"]) == ["silver", "gold"]
    assert list(table["spend_usd"]) == [Decimal("5.00"), Decimal("3.00")]
    assert list(table["share_pct"]) == [Decimal("62.5"), Decimal("37.5")]
    series = tags.over_time(daily, "tag_value", "W")  # ISO weeks: Oct 26, Nov 2, Nov 9
    assert [(p.strftime("%m-%d"), v, c) for p, v, c in zip(
        series["period"], series["tag_value"], series["actual_cost_usd"], strict=True
    )] == [("10-26", "gold", Decimal("1.00")), ("11-02", "silver", Decimal("5.00")),
           ("11-09", "gold", Decimal("2.00"))]  # fmt: skip
    gold = dataclasses.replace(RANGE, tag_key="tier", tag_values=("gold",))
    assert list(tags.table(cq.tag_series(ledger, gold, "tier"), "tag_value")["spend_usd"]) == [
        Decimal("3.00")
    ]
    by_app = tags.table(cq.attributed_series(ledger, gold, IdView.CLEAR, "app"), "app")
    assert list(by_app["spend_usd"]) == [Decimal("3.00")]
    alice = dataclasses.replace(RANGE, end_users=("alice",))
    by_app = tags.table(cq.attributed_series(ledger, alice, IdView.CLEAR, "app"), "app")
    assert list(by_app["app"]) == ["search", "chat"]
    assert list(by_app["spend_usd"]) == [Decimal("4.00"), Decimal("0.50")]


def test_an_empty_range_has_no_end_users(ledger):
    empty = Filters(start=dt.date(2026, 9, 1), end=dt.date(2026, 9, 30))
    frame = cq.users(ledger, empty, IdView.CLEAR)
    s = econ.user_summary(frame, cq.user_days(ledger, empty, IdView.CLEAR))
    assert (s.end_users, s.spend_usd, s.user_days, s.day_p50_usd) == (0, None, 0, None)
    assert econ.top_users(frame).empty
    assert econ.session_summary(cq.sessions(ledger, empty, IdView.CLEAR)).sessions == 0


def test_a_team_scoped_user_is_offered_its_own_teams_tag_keys_and_values(ledger, ledger_engine):
    insert_records(ledger_engine, [
        spent("1.00", 2, team="payments", tags={"tier": "platinum", "customer": "acme"}),
    ])  # fmt: skip
    st.cache_data.clear()
    assert cq.tag_keys(ledger) == ["customer", "feature", "tier"]
    assert cq.tag_keys(ledger, "platform") == ["feature", "tier"]
    assert cq.tag_keys(ledger, "payments") == ["customer", "tier"]
    assert cq.tag_values(ledger, "tier", "platform") == ["gold", "silver"]
    assert cq.tag_values(ledger, "tier") == ["gold", "platinum", "silver"]
