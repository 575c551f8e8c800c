"""A budget's figures for its period (spent from the ledger, reserved from live leases)
and the once-only alert row."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal

import pytest
from sqlalchemy import Engine, func, insert

from db.budget_alerts import (
    SpentCache,
    budget_figures,
    claim_alert,
    ensure_alert_row,
    mark_sent,
    sent_alerts,
)
from db.budgets import set_budget
from db.models import BudgetLease, UsageRow
from gateway.domain.budgets import BudgetPeriod, BudgetScope

pytestmark = pytest.mark.usefixtures("clean_ledger")

NOW = dt.datetime(2026, 12, 9, 12, tzinfo=dt.UTC)  # a Wednesday
WEEK_START = dt.datetime(2026, 12, 7, tzinfo=dt.UTC)


def _spend(engine: Engine, at: dt.datetime, usd: str, app: str = "shop") -> None:
    with engine.begin() as conn:
        conn.execute(
            insert(UsageRow).values(
                request_id=uuid.uuid4(),
                started_at=at,
                ended_at=at,
                app=app,
                requested_model="m",
                stream=False,
                status="ok",
                http_status=200,
                usage_source="provider",
                latency_ms=1,
                attempts=1,
                actual_cost_usd=Decimal(usd),
            )
        )


def _lease(
    engine: Engine, budget_id: int, start: dt.datetime, holder: str, usd: str, ttl: int
) -> None:
    with engine.begin() as conn:
        conn.execute(
            insert(BudgetLease).values(
                budget_id=budget_id,
                period_start=start,
                holder=holder,
                held_usd=Decimal(usd),
                expires_at=func.now() + dt.timedelta(seconds=ttl),
            )
        )


def test_figures_are_the_periods_ledger_spend_and_the_live_leases(ledger_engine: Engine) -> None:
    week = set_budget(
        ledger_engine, BudgetScope.APP, "shop", BudgetPeriod.WEEK, Decimal(2), actor="t"
    )
    _spend(ledger_engine, WEEK_START, "0.5")
    _spend(ledger_engine, NOW, "0.25")
    _spend(ledger_engine, WEEK_START - dt.timedelta(seconds=1), "9")  # last week
    _spend(ledger_engine, NOW, "9", app="other")
    _lease(ledger_engine, week.id, WEEK_START, "replica-a", "0.1", ttl=60)
    _lease(ledger_engine, week.id, WEEK_START, "replica-b", "0.05", ttl=60)
    _lease(ledger_engine, week.id, WEEK_START, "dead", "7", ttl=-1)  # lapsed
    _lease(ledger_engine, week.id, WEEK_START - dt.timedelta(days=7), "old", "7", ttl=60)
    (f,) = budget_figures(ledger_engine, NOW)
    assert (f.period_start, f.period_end) == (WEEK_START, WEEK_START + dt.timedelta(days=7))
    assert f.spent_usd == Decimal("0.75")
    assert f.reserved_usd == Decimal("0.15")
    assert f.spent_pct == Decimal("37.5")


def test_an_alert_row_is_claimed_by_one_sender_and_never_after_it_was_sent(
    ledger_engine: Engine,
) -> None:
    b = set_budget(ledger_engine, BudgetScope.ALL, "", BudgetPeriod.DAY, Decimal(1), actor="t")
    start = dt.datetime(2026, 12, 9, tzinfo=dt.UTC)
    ensure_alert_row(ledger_engine, b.id, start, 80)
    ensure_alert_row(ledger_engine, b.id, start, 80)  # a second insert changes nothing
    with ledger_engine.begin() as first:
        assert claim_alert(first, b.id, start, 80) == 0
        with ledger_engine.begin() as second:
            assert claim_alert(second, b.id, start, 80) is None  # held: skipped
        mark_sent(first, b.id, start, 80, attempts=2)
    with ledger_engine.begin() as later:
        assert claim_alert(later, b.id, start, 80) is None  # sent
    ((budget_id, period_start, threshold, sent_at, attempts),) = sent_alerts(ledger_engine)
    assert (budget_id, period_start, threshold, attempts) == (b.id, start, 80, 2)
    assert sent_at is not None


def test_the_watchs_cache_sums_the_closed_part_once_and_late_rows_within_refresh(
    ledger_engine: Engine,
) -> None:
    set_budget(ledger_engine, BudgetScope.APP, "shop", BudgetPeriod.WEEK, Decimal(100), actor="t")
    _spend(ledger_engine, WEEK_START + dt.timedelta(hours=1), "1")  # closed: summed once
    _spend(ledger_engine, NOW - dt.timedelta(minutes=5), "2")  # recent: every round
    clock = [0.0]
    cache = SpentCache(settle_s=600, refresh_s=300, clock=lambda: clock[0])
    assert budget_figures(ledger_engine, NOW, cache)[0].spent_usd == 3
    _spend(ledger_engine, NOW - dt.timedelta(minutes=1), "4")  # recent: counted at once
    _spend(ledger_engine, WEEK_START + dt.timedelta(hours=2), "8")  # late, in the closed part
    clock[0] = 200.0
    assert budget_figures(ledger_engine, NOW, cache)[0].spent_usd == 7
    clock[0] = 301.0  # the closed part is summed again: the late row counts
    assert budget_figures(ledger_engine, NOW, cache)[0].spent_usd == 15
    assert budget_figures(ledger_engine, NOW)[0].spent_usd == 15  # what no cache says
    # an hour later the cut moves on: the closed part is summed again at once
    _spend(ledger_engine, WEEK_START + dt.timedelta(hours=3), "16")
    later = NOW + dt.timedelta(hours=1)
    assert budget_figures(ledger_engine, later, cache)[0].spent_usd == 31
