"""Leases under real PostgreSQL locks: slices never add up past the limit, lapse when not
renewed, count settled spend before the ledger has it; buckets refill and cap."""

from __future__ import annotations

import datetime as dt
import time
import uuid
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import Engine, insert, text

from db.budgets import set_budget
from db.leases import (
    BudgetLeaseState,
    ledger_spent,
    prune_leases,
    sync_budget_lease,
    take_from_bucket,
)
from db.models import UsageRow
from gateway.domain.budgets import BudgetPeriod, BudgetScope, period_window

pytestmark = pytest.mark.usefixtures("clean_ledger")

D = Decimal


def _budget(engine: Engine, limit: str) -> tuple[int, dt.datetime, dt.datetime]:
    b = set_budget(engine, BudgetScope.APP, "shop", BudgetPeriod.DAY, D(limit), actor="t")
    start, end = period_window(BudgetPeriod.DAY, dt.datetime.now(dt.UTC))
    return b.id, start, end


def _sync(
    engine: Engine, bid: int, start: dt.datetime, end: dt.datetime, holder: str, **kw: Any
) -> BudgetLeaseState | None:
    args: dict[str, Any] = {
        "settled_delta": D(0),
        "returned_usd": D(0),
        "in_use_usd": D(0),
        "want_free_usd": D(1),
        "ttl_s": 30.0,
    }
    with engine.begin() as conn:
        return sync_budget_lease(conn, bid, start, end, holder, **(args | kw))


def test_two_holders_share_the_budget_and_never_hold_more_than_it(ledger_engine: Engine) -> None:
    bid, start, end = _budget(ledger_engine, "0.02")
    a = _sync(ledger_engine, bid, start, end, "a")
    assert a is not None and a.held_usd == D("0.02")  # alone: all of it
    b = _sync(ledger_engine, bid, start, end, "b", min_free_usd=D("0.005"))
    assert b is not None and b.held_usd == 0  # nothing left while a holds it
    a = _sync(ledger_engine, bid, start, end, "a", returned_usd=D("0.016"), want_free_usd=D(0))
    assert a is not None and a.held_usd == D("0.004")  # a hands back what it does not need
    b = _sync(ledger_engine, bid, start, end, "b", want_free_usd=D(1))
    assert b is not None
    assert b.held_usd == D("0.008")  # a fair share of the 0.016 free between two holders
    assert b.reserved_usd == D("0.012") and b.remaining_usd == D("0.008")


def test_settled_spend_counts_at_once_and_in_flight_holds_stay(ledger_engine: Engine) -> None:
    bid, start, end = _budget(ledger_engine, "0.02")
    _sync(ledger_engine, bid, start, end, "a", want_free_usd=D("0.02"))
    # a settled 0.015 (the ledger may not have it yet) and keeps 0.005 in flight
    a = _sync(
        ledger_engine,
        bid,
        start,
        end,
        "a",
        settled_delta=D("0.015"),
        in_use_usd=D("0.005"),
        want_free_usd=D(1),
    )
    assert a is not None
    assert (a.spent_usd, a.held_usd, a.remaining_usd) == (D("0.015"), D("0.005"), D(0))
    assert a.renewed and a.granted_usd == 0


def test_a_hold_that_is_not_renewed_lapses(ledger_engine: Engine) -> None:
    bid, start, end = _budget(ledger_engine, "0.02")
    _sync(ledger_engine, bid, start, end, "dead", ttl_s=0.2)
    time.sleep(0.3)
    b = _sync(ledger_engine, bid, start, end, "b", want_free_usd=D(1))
    assert b is not None and b.held_usd == D("0.02")
    dead = _sync(ledger_engine, bid, start, end, "dead", in_use_usd=D("0.001"))
    assert dead is not None and not dead.renewed
    assert dead.held_usd == D("0.001")  # its requests in flight stay held, past the limit


def test_a_removed_budget_has_no_lease(ledger_engine: Engine) -> None:
    bid, start, end = _budget(ledger_engine, "1")
    with ledger_engine.begin() as conn:
        conn.execute(text("DELETE FROM budgets"))
    assert _sync(ledger_engine, bid, start, end, "a") is None


def test_a_bucket_starts_full_gives_what_it_has_and_takes_back(ledger_engine: Engine) -> None:
    with ledger_engine.begin() as conn:
        first = take_from_bucket(conn, "key:k:rpm", 20, give_back=0, want=15)
        second = take_from_bucket(conn, "key:k:rpm", 20, give_back=0, want=15)
    assert (first.granted, second.granted) == (15, 5)
    with ledger_engine.begin() as conn:
        back = take_from_bucket(conn, "key:k:rpm", 20, give_back=3, want=0)
    assert back.granted == 0 and D(3) <= back.level < D(4)  # plus a little refill
    with ledger_engine.begin() as conn:
        full = take_from_bucket(conn, "key:k:rpm", 20, give_back=100, want=0)
    assert full.level == 20  # never past capacity


def _row(engine: Engine, at: dt.datetime, cost: str, **who: Any) -> None:
    row = {
        "request_id": uuid.uuid4(),
        "started_at": at,
        "ended_at": at,
        "app": "shop",
        "requested_model": "m",
        "stream": False,
        "status": "ok",
        "http_status": 200,
        "usage_source": "provider",
        "latency_ms": 1,
        "attempts": 1,
        "actual_cost_usd": D(cost),
    } | who
    with engine.begin() as conn:
        conn.execute(insert(UsageRow).values(**row))


def test_each_end_user_leases_the_whole_limit_and_counts_only_their_own_spend(
    ledger_engine: Engine,
) -> None:
    b = set_budget(ledger_engine, BudgetScope.EACH_USER, "shop", BudgetPeriod.DAY, D("0.02"),
                   actor="t")  # fmt: skip
    start, end = period_window(BudgetPeriod.DAY, dt.datetime.now(dt.UTC))
    _row(ledger_engine, start, "0.015", end_user="alice")  # before any lease: the ledger's
    _row(ledger_engine, start, "7", end_user="carol", app="blog")  # another app's user
    alice = _sync(ledger_engine, b.id, start, end, "a", subject="alice")
    bob = _sync(ledger_engine, b.id, start, end, "a", subject="bob")
    assert alice is not None and bob is not None
    assert (alice.spent_usd, alice.held_usd) == (D("0.015"), D("0.005"))
    assert (bob.spent_usd, bob.held_usd) == (D(0), D("0.02"))  # all of it, to himself
    # another holder: alice's slice is shared between holders, bob's untouched
    a2 = _sync(ledger_engine, b.id, start, end, "b", subject="alice", min_free_usd=D("0.001"))
    assert a2 is not None and a2.held_usd == 0 and a2.holders == 2
    with ledger_engine.connect() as conn:
        subjects = conn.execute(
            text("SELECT subject, count(*) FROM budget_leases GROUP BY subject ORDER BY 1")
        ).all()
    assert [tuple(r) for r in subjects] == [("alice", 2), ("bob", 1)]


def test_a_tag_budget_reads_whole_days_from_the_rollup_and_keeps_the_baseline(
    ledger_engine: Engine,
) -> None:
    b = set_budget(ledger_engine, BudgetScope.TAG, "feature=search", BudgetPeriod.MONTH, D(100),
                   actor="t")  # fmt: skip
    today = dt.datetime.now(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    start, end = today - dt.timedelta(days=3), today + dt.timedelta(days=1)
    search = {"tags": {"feature": "search", "env": "prod"}}
    _row(ledger_engine, start + dt.timedelta(hours=5), "1", **search)  # a whole past day
    _row(ledger_engine, start + dt.timedelta(hours=6), "64", tags={"feature": "chat"})
    _row(ledger_engine, today, "2", app="blog", **search)  # any app with the tag
    _row(ledger_engine, today, "4")  # no tag at all
    with ledger_engine.connect() as conn:
        before = ledger_spent(conn, b.id, BudgetScope.TAG, b.scope_value, start, end)
    assert before == (D(3), D(3))  # no lease yet: all of it came before one
    first = _sync(ledger_engine, b.id, start, end, "a")
    assert first is not None and first.spent_usd == 3
    _row(ledger_engine, dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1), "8", **search)
    with ledger_engine.connect() as conn:
        after = ledger_spent(conn, b.id, BudgetScope.TAG, b.scope_value, start, end)
    assert after == (D(11), D(3))  # the new row is the holders' to report, not baseline
    # an expired-for-good lease goes; a live one stays
    with ledger_engine.begin() as conn:
        conn.execute(text("UPDATE budget_leases SET expires_at = now() - interval '40 days'"))
        assert prune_leases(conn) == 1
